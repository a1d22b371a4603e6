"""Evalsite's Django project (settings, urls, ASGI) and the ``evalsite`` command.

``evalsite.cases`` is the pytest plugin's decorator (:func:`evalsite.pytest_plugin.cases`),
imported on first use so that loading the settings never imports pytest.
"""

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "cases":
        from evalsite.pytest_plugin import cases

        return cases
    raise AttributeError(f"module 'evalsite' has no attribute {name!r}")
