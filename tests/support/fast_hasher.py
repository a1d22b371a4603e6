"""A PBKDF2 password hasher with one iteration, for the test process only.

The persona fixtures (``member``, ``viewer``, ``staff``, ...) create users, and Django's default
PBKDF2 hasher is slow on purpose (about a second per hash on a loaded 2-core machine): most of a
small page test's time. This hasher keeps Django's algorithm name (``pbkdf2_sha256``) and format,
so a hash it writes is an ordinary PBKDF2 hash that records its iteration count: a CLI or server
subprocess with the real settings still verifies it (and upgrades it on a login, as it would an
old hash). ``tests/conftest.py`` puts it first in ``PASSWORD_HASHERS`` for the session.
"""

from __future__ import annotations

from django.contrib.auth.hashers import PBKDF2PasswordHasher


class FastPBKDF2PasswordHasher(PBKDF2PasswordHasher):
    """``pbkdf2_sha256`` with 1 iteration (the real one's format, none of its cost)."""

    iterations = 1


def fast_password_hashers(hashers: list[str]) -> list[str]:
    """``hashers`` (a ``PASSWORD_HASHERS`` list) with Django's PBKDF2 hasher replaced by the fast one.

    Raises:
        ValueError: Django's PBKDF2 hasher is not in ``hashers`` (nothing to replace).
    """
    real = "django.contrib.auth.hashers.PBKDF2PasswordHasher"
    if real not in hashers:
        raise ValueError(f"PASSWORD_HASHERS has no {real} to replace: {hashers}")
    fast = f"{__name__}.{FastPBKDF2PasswordHasher.__name__}"
    return [fast if name == real else name for name in hashers]
