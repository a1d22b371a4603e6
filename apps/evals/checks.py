"""System checks of Evalsite's own settings (run by ``check`` and ``check --deploy``)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Tags, Warning, register

from apps.core.secret_key import OLD_PUBLIC_KEY


@register(Tags.security, deploy=True)
def check_public_secret_key(app_configs: Any = None, **kwargs: Any) -> list[Warning]:
    """W009 when the secret key is the constant earlier versions shipped (it is public, so
    anyone could forge sessions and password-reset tokens). Django's own W009 misses it: the
    constant is long and varied enough to pass its length test."""
    if settings.SECRET_KEY != OLD_PUBLIC_KEY:
        return []
    return [
        Warning(
            "SECRET_KEY is the public development constant of earlier Evalsite versions.",
            hint="Unset EVALSITE_SECRET_KEY (a random key is then kept in the data folder) or set it to "
            "a long random value, e.g. python -c 'import secrets; print(secrets.token_urlsafe(50))'.",
            id="security.W009",
        )
    ]
