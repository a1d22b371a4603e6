"""A read model declared once: the API's ``XOut`` schema takes its fields from the dataclass the
pages and the CLI read.

A query returns a dataclass (``RunState``, ``ScorerDelta``...); the page renders it, the CLI
prints it and the API answers it through an ``XOut`` schema. Writing that schema's fields again
lets the two drift, so ``@fields_of(RunState)`` fills an ``XOut`` class with the dataclass's
fields: the same names, the same types (nested read models swapped for their own schemas), and
the API's description of a field where it has one. The class
keeps its name (the OpenAPI component), its docstring and anything it declares itself: a field
computed by a ``resolve_*`` method, or a field declared again to change how the API shows it.
"""

from __future__ import annotations

import dataclasses
import functools
import operator
import types
from collections.abc import Callable, Collection, Mapping
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin, get_type_hints

from ninja import Schema
from pydantic import Field, create_model

S = TypeVar("S", bound=Schema)


def fields_of(
    source: type,
    *,
    nested: Mapping[type, type[Schema]] | None = None,
    exclude: Collection[str] = (),
    describe: Mapping[str, str] | None = None,
) -> Callable[[type[S]], type[S]]:
    """Decorate an ``XOut`` schema so that it holds every field of the dataclass ``source``.

    Every field is required: a response is read from a whole ``source`` object, which has them
    all. Fields the class declares itself are kept as declared.

    Args:
        source: The read model (a dataclass).
        nested: Read models that ``source``'s fields hold (``list[RunState]``) and the schema
            to show each as (``RunStateOut``), so the API's components keep their names.
        exclude: Fields of ``source`` the API does not show.
        describe: The API's description of some of the fields, by field name.

    Raises:
        TypeError: ``exclude`` or ``describe`` names a field ``source`` does not have.

    Returns:
        The decorator; it returns a subclass of the schema with the same name and docstring.
    """
    swaps = dict(nested or {})
    descriptions = dict(describe or {})

    def decorate(schema: type[S]) -> type[S]:
        hints = get_type_hints(source, include_extras=True)
        names = [f.name for f in dataclasses.fields(source)]
        unknown = sorted((set(exclude) | set(descriptions)) - set(names))
        if unknown:
            raise TypeError(f"{source.__name__} has no field {', '.join(unknown)}")
        fields: dict[str, Any] = {}
        for name in names:
            if name in schema.model_fields or name in exclude:
                continue
            hint = _swap(hints[name], swaps)
            if name in descriptions:
                hint = Annotated[hint, Field(description=descriptions[name])]
            fields[name] = (hint, ...)
        derived = create_model(
            schema.__name__, __base__=schema, __module__=schema.__module__, __doc__=schema.__doc__, **fields
        )
        derived.__qualname__ = schema.__qualname__
        return derived

    return decorate


def _swap(hint: Any, swaps: Mapping[type, type[Schema]]) -> Any:
    """``hint`` with every read model in ``swaps`` replaced by its schema (``list[RunState] | None``
    becomes ``list[RunStateOut] | None``)."""
    if hint in swaps:
        return swaps[hint]
    args = get_args(hint)
    new = tuple(_swap(arg, swaps) for arg in args)
    if new == args:
        return hint
    origin = get_origin(hint)
    if origin is Annotated:
        return Annotated[(new[0], *hint.__metadata__)]
    if origin in (Union, types.UnionType):
        return functools.reduce(operator.or_, new)
    return origin[new if len(new) > 1 else new[0]]
