"""Model fields that redact credentials as their value is written (see :mod:`evalcore.redact`).

Applying :func:`evalcore.redact.redact` in ``get_prep_value`` covers every write path at once:
``save()``, ``bulk_create()``, ``update()`` and the admin, from the CLI, the task worker and the
server alike. They deconstruct as the plain Django fields, so migrations do not change.
"""

from __future__ import annotations

from typing import Any

from django.db import models

from evalcore.redact import redact, redact_text


class RedactedJSONField(models.JSONField):
    """A ``JSONField`` whose strings (values and keys) are redacted on the way in."""

    def get_prep_value(self, value: Any) -> Any:
        return super().get_prep_value(redact(value))

    def deconstruct(self) -> Any:
        name, _path, args, kwargs = super().deconstruct()
        return name, "django.db.models.JSONField", args, kwargs


class RedactedTextField(models.TextField):
    """A ``TextField`` redacted on the way in."""

    def get_prep_value(self, value: Any) -> Any:
        value = super().get_prep_value(value)
        return redact_text(value) if isinstance(value, str) else value

    def deconstruct(self) -> Any:
        name, _path, args, kwargs = super().deconstruct()
        return name, "django.db.models.TextField", args, kwargs


class RedactedCharField(models.CharField):
    """A ``CharField`` redacted on the way in."""

    def get_prep_value(self, value: Any) -> Any:
        value = super().get_prep_value(value)
        return redact_text(value) if isinstance(value, str) else value

    def deconstruct(self) -> Any:
        name, _path, args, kwargs = super().deconstruct()
        return name, "django.db.models.CharField", args, kwargs
