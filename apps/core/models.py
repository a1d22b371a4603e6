"""API tokens: bearer credentials for the CLI and CI (see :mod:`apps.core.auth`)."""

from __future__ import annotations

import hashlib
from datetime import datetime

from django.conf import settings
from django.db import models
from django.utils import timezone


class Scope(models.TextChoices):
    """What an API token may do, weakest first (see :class:`ApiToken`)."""

    READ = "read", "read"
    WRITE = "write", "write"
    ADMIN = "admin", "admin"


class ApiToken(models.Model):
    """A bearer token for the CLI and CI; only its sha256 is stored.

    Its ``scope`` caps what it may do, below its user's role (a token's power is the lower of
    the two): ``read`` reads (viewer), ``write`` also starts and edits runs, reviews, captures
    and sends traces (member), ``admin`` has all its user's power (staff actions such as
    deleting runs). Tokens made before scopes existed became ``write`` (migration 0002).

    The table keeps its first name (``evals_apitoken``): the model moved here from ``evals``
    without touching the rows, so tokens made before the move still work.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=12)
    token_hash = models.CharField(max_length=64, unique=True)
    created = models.DateTimeField(auto_now_add=True)
    last_used = models.DateTimeField(null=True, blank=True)
    # refused from this time on (None: never expires)
    expires = models.DateTimeField(null=True, blank=True)
    scope = models.CharField(max_length=8, choices=Scope.choices, default=Scope.WRITE)

    class Meta:
        db_table = "evals_apitoken"

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…, {self.scope})"

    def expired(self, now: datetime | None = None) -> bool:
        """Whether the token is past its expiry (``now`` defaults to the current time)."""
        return self.expires is not None and (now or timezone.now()) >= self.expires

    @staticmethod
    def hash(raw: str) -> str:
        """The stored form of a raw token: its sha256, 64 hex digits."""
        return hashlib.sha256(raw.encode()).hexdigest()


class PasswordResetAttempt(models.Model):
    """One password-reset request, kept for the rate limits (:mod:`apps.core.password_reset`).

    The address is kept as a sha256, not as typed: the table must not become a list of the
    addresses strangers tried. Rows older than the longest window are deleted as new ones come.
    """

    address_hash = models.CharField(max_length=64)
    client_ip = models.CharField(max_length=64, blank=True, default="")
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [
            # the per-address and per-IP counts over the last hour
            models.Index(fields=["address_hash", "created"], name="core_reset_address_idx"),
            models.Index(fields=["client_ip", "created"], name="core_reset_ip_idx"),
            models.Index(fields=["created"], name="core_reset_created_idx"),
        ]
