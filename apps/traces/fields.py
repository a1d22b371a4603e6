"""Model fields that redact credentials as their value is written (see :mod:`evalcore.redact`),
and store a NUL character as U+FFFD (see :mod:`apps.core.storable`).

Applying :func:`evalcore.redact.redact` in ``get_prep_value`` covers every write path at once:
``save()``, ``bulk_create()``, ``update()`` and the admin, from the CLI, the task worker and the
server alike. They deconstruct as the plain Django fields, so migrations do not change.
"""

from __future__ import annotations

import math
from typing import Any

from django.db import models

from apps.core.storable import storable, storable_text
from evalcore.redact import redact, redact_error_fields, redact_text


class RedactedJSONField(models.JSONField):
    """A ``JSONField`` whose strings (values and keys) are redacted on the way in.

    NaN and infinities are refused here with a ``ValueError`` naming the field and where the
    number sits: ``json.dumps`` would write them as ``NaN`` / ``Infinity``, which is not JSON, and
    SQLite's ``JSON_VALID`` CHECK would then fail with an opaque ``IntegrityError``.
    """

    def get_prep_value(self, value: Any) -> Any:
        value = storable(self.redacted(value))
        where = non_finite_at(value, "")
        if where is not None:
            label = f"{self.model.__name__}.{self.name}" if hasattr(self, "model") else self.name
            raise ValueError(f"{label}{where[0]}: {where[1]!r} is not valid JSON (NaN / Infinity are refused)")
        return super().get_prep_value(value)

    def redacted(self, value: Any) -> Any:
        """``value`` with its credentials removed (:func:`evalcore.redact.redact`)."""
        return redact(value)

    def deconstruct(self) -> Any:
        name, _path, args, kwargs = super().deconstruct()
        return name, "django.db.models.JSONField", args, kwargs


class OutputJSONField(RedactedJSONField):
    """A JSON column holding what a target produced (a run's final answer): stored exactly as
    produced (scorers and ``rescore`` read it), only made storable (NUL, NaN checks)."""

    def redacted(self, value: Any) -> Any:
        """``value`` unchanged: redaction never alters a target's output."""
        return value


class PayloadJSONField(RedactedJSONField):
    """A trace payload column: only the payload's ``error`` is redacted
    (:func:`evalcore.redact.redact_error_fields`); the rest is what the target produced."""

    def redacted(self, value: Any) -> Any:
        """``value`` with its ``error`` redacted."""
        return redact_error_fields(value)


def non_finite_at(value: Any, path: str) -> tuple[str, float] | None:
    """``(path, number)`` of the first NaN / infinity inside ``value`` (path like ``['a'][0]``,
    ``""`` for ``value`` itself), else ``None``."""
    if isinstance(value, float):
        return None if math.isfinite(value) else (path, value)
    if isinstance(value, dict):
        for key, item in value.items():
            found = non_finite_at(item, f"{path}[{key!r}]")
            if found:
                return found
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = non_finite_at(item, f"{path}[{index}]")
            if found:
                return found
    return None


class RedactedTextField(models.TextField):  # type: ignore[type-arg]  # generic in the stubs only
    """A ``TextField`` redacted on the way in."""

    def get_prep_value(self, value: Any) -> Any:
        value = super().get_prep_value(value)
        return storable_text(redact_text(value)) if isinstance(value, str) else value

    def deconstruct(self) -> Any:
        name, _path, args, kwargs = super().deconstruct()
        return name, "django.db.models.TextField", args, kwargs


class _Storable:
    """Makes a text field's value storable (NUL, surrogates: :func:`storable_text`), never redacted."""

    def get_prep_value(self, value: Any) -> Any:
        value = super().get_prep_value(value)  # type: ignore[misc]  # the Django field after this mixin
        return storable_text(value) if isinstance(value, str) else value


class StorableTextField(_Storable, models.TextField):  # type: ignore[type-arg]  # generic in the stubs only
    """A ``TextField`` made storable (NUL, surrogates) but never redacted: text a target was given
    or produced (a playground message)."""

    def deconstruct(self) -> Any:
        name, _path, args, kwargs = super().deconstruct()
        return name, "django.db.models.TextField", args, kwargs


class StorableCharField(_Storable, models.CharField):  # type: ignore[type-arg]  # generic in the stubs only
    """A ``CharField`` made storable (NUL, surrogates) but never redacted: text a target produced."""

    def deconstruct(self) -> Any:
        name, _path, args, kwargs = super().deconstruct()
        return name, "django.db.models.CharField", args, kwargs


class RedactedCharField(models.CharField):  # type: ignore[type-arg]  # generic in the stubs only
    """A ``CharField`` redacted on the way in."""

    def get_prep_value(self, value: Any) -> Any:
        value = super().get_prep_value(value)
        return storable_text(redact_text(value)) if isinstance(value, str) else value

    def deconstruct(self) -> Any:
        name, _path, args, kwargs = super().deconstruct()
        return name, "django.db.models.CharField", args, kwargs
