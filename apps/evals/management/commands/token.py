"""``evalsite token create|list|revoke``: API tokens for the CLI and CI.

The raw token is printed once, at creation; the database keeps only its sha256.
"""

from __future__ import annotations

import re
from argparse import ArgumentParser, ArgumentTypeError
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from apps.core.access import can_start_runs
from apps.core.auth import DEFAULT_LIFETIME, MAX_LIFETIME, create_api_token, revoke_api_tokens
from apps.core.models import ApiToken, Scope

_UNITS = {"d": "days", "h": "hours", "m": "minutes"}


def _role_short_of(user: Any, scope: str) -> str:
    """What ``user``'s role lacks that ``scope`` would grant (``"not staff"``, ``"not a member"``,
    both), or ``""``: a token's power is the lower of the two."""
    missing = []
    if scope == Scope.ADMIN and not user.is_staff:
        missing.append("staff")
    if scope in (Scope.WRITE, Scope.ADMIN) and not can_start_runs(user):
        missing.append("a member")
    return "not " + " nor ".join(missing) if missing else ""


def parse_lifetime(text: str) -> timedelta | None:
    """``90d`` / ``12h`` / ``30m`` -> a timedelta, ``never`` -> ``None`` (argparse type).

    The number is ASCII digits (``\\d`` would take ``١``, an Arabic-Indic one, as 1), at most
    :data:`~apps.core.auth.MAX_LIFETIME` (about 10 years; a larger one overflowed the date).

    Raises:
        ArgumentTypeError: Another shape, zero, or over the longest lifetime (argparse prints it
            as one usage line naming ``--expires-in``).
    """
    if text.strip().lower() == "never":
        return None
    match = re.fullmatch(r"\s*([0-9]+)\s*([dhm])\s*", text.lower(), flags=re.ASCII)
    if not match or not match.group(1).strip("0"):
        raise ArgumentTypeError(f"{text!r} is not a lifetime like 90d, 12h or 30m (or never)")
    over = MAX_LIFETIME.days * 24 * 60 + 1  # more minutes than the longest lifetime: no overflow, no 4,300-digit int()
    digits = match.group(1).lstrip("0")
    lifetime = timedelta(**{_UNITS[match.group(2)]: over if len(digits) > 9 else min(int(digits), over)})
    if lifetime > MAX_LIFETIME:
        raise ArgumentTypeError(
            f"{text!r} is over the longest lifetime, {MAX_LIFETIME.days}d (about 10 years); or never"
        )
    return lifetime


class Command(BaseCommand):
    help = "Create, list and revoke API tokens (sent as `Authorization: Bearer <token>`)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True, metavar="{create,list,revoke}")
        create = sub.add_parser("create", help="create a token for a user and print it once")
        create.add_argument("--user", required=True, help="username the token acts as")
        create.add_argument("--name", default="", help="a label to tell tokens apart (e.g. ci)")
        create.add_argument(
            "--expires-in",
            default=DEFAULT_LIFETIME,
            type=parse_lifetime,
            metavar="N{d,h,m}|never",
            help=f"refuse the token after this long, e.g. 90d, 12h, 30m, or never (default: {DEFAULT_LIFETIME.days}d)",
        )
        create.add_argument(
            "--scope",
            default=Scope.WRITE.value,
            choices=Scope.values,
            help="what the token may do, capped by the user's role: read (read only), write (also start and "
            "edit runs, review, capture, send traces; the default), admin (all the user's powers, staff ones too)",
        )
        listing = sub.add_parser("list", help="list tokens (prefix, user, name, scope, created, last used, expires)")
        listing.add_argument("--user", default=None, help="only this user's tokens")
        revoke = sub.add_parser("revoke", help="revoke the token(s) with this prefix")
        revoke.add_argument("prefix", help="the prefix shown by `token list` (e.g. esk_AbCdEf12)")

    def handle(self, *args: Any, **options: Any) -> None:
        action = options["action"]
        if action == "create":
            self.create(options["user"], options["name"], options["expires_in"], options["scope"])
        elif action == "list":
            self.list(options["user"])
        else:
            self.revoke(options["prefix"])

    def create(
        self, username: str, name: str, expires_in: timedelta | None = DEFAULT_LIFETIME, scope: str = Scope.WRITE
    ) -> None:
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user {username!r} (create one with `evalsite createsuperuser`)", returncode=2)
        token, raw = create_api_token(user=user, name=name, expires_in=expires_in, scope=scope)
        self.stdout.write(raw)
        until = f", expires {token.expires:%Y-%m-%d %H:%M} UTC" if token.expires else ", never expires"
        self.stderr.write(
            f"token {token.prefix}… for {username} ({token.name}, scope {token.scope}{until}); "
            "shown once, store it now.\n"
            "send it as: Authorization: Bearer <token>"
        )
        short = _role_short_of(user, token.scope)
        if short:
            self.stderr.write(
                f"note: user {username!r} is {short}: "
                f"this {token.scope} token can do no more than the user's role allows"
            )

    def list(self, username: str | None) -> None:
        now = timezone.now()
        tokens = ApiToken.objects.select_related("user").order_by("user__username", "created")
        if username:
            tokens = tokens.filter(user__username=username)
        rows = [
            (
                t.prefix,
                t.user.get_username(),
                t.name,
                t.scope,
                t.created.strftime("%Y-%m-%d %H:%M"),
                t.last_used.strftime("%Y-%m-%d %H:%M") if t.last_used else "never",
                ("expired " if t.expired(now) else "") + t.expires.strftime("%Y-%m-%d %H:%M") if t.expires else "never",
            )
            for t in tokens
        ]
        if not rows:
            self.stdout.write("no tokens")
            return
        header = ("prefix", "user", "name", "scope", "created", "last used", "expires")
        widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
        for row in [header, *rows]:
            self.stdout.write("  ".join(str(v).ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())

    def revoke(self, prefix: str) -> None:
        try:
            n = revoke_api_tokens(prefix)
        except ValueError as exc:
            raise CommandError(str(exc), returncode=2) from exc
        if not n:
            raise CommandError(f"no token with prefix {prefix!r} (see `evalsite token list`)", returncode=2)
        self.stdout.write(f"revoked {n} token{'s' if n != 1 else ''} with prefix {prefix}")
