"""Package names imported on first use (PEP 562 module ``__getattr__``), so ``import evalcore``
or ``import evalcore.scorers`` costs nothing until a name is read (CLI start-up time)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    namespace: dict[str, Any], exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of a package whose public names live in submodules.

    Args:
        namespace: The package's ``globals()``: a name, once imported, is stored there (the next
            read does not come back here).
        exports: Public name -> the module that defines it.

    Returns:
        ``(__getattr__, __dir__)``, to assign at the package's top level.
    """
    package = namespace["__name__"]

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value  # found once
        return value

    def __dir__() -> list[str]:
        return sorted([*namespace, *exports])

    return __getattr__, __dir__
