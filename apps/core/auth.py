"""API authentication: Django sessions (browser) or bearer API tokens (CLI, CI).

A token is shown once at creation; only its sha256 is stored, with a short prefix kept so a
person can tell tokens apart in ``evalsite token list`` and revoke one by it.

A token's power is the lower of its scope and its user's role (:func:`user_for_token`): a
``read`` token only reads, a ``write`` token has its user's member powers but never staff ones,
an ``admin`` token all of its user's. New tokens expire after :data:`DEFAULT_LIFETIME` unless
made with no expiry on purpose.

Order matters in :data:`api_auth`: the bearer check runs first, because ninja's cookie auth
checks CSRF before looking at the user and would answer 403 to a token-authenticated POST
that carries no CSRF cookie (tokens are not ambient credentials, so they need no CSRF check).
"""

from __future__ import annotations

import secrets
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.http import HttpRequest
from django.utils import timezone
from ninja.security import HttpBearer, SessionAuth

from apps.core.access import VIEW_PERMISSION
from apps.core.models import ApiToken, Scope

TOKEN_PREFIX = "esk_"
PREFIX_CHARS = 12
# last_used is a hint for people, not an audit log: write it at most once a minute per token
# so a busy CI job does not turn every read into a write on SQLite.
LAST_USED_RESOLUTION = timedelta(minutes=1)
DEFAULT_LIFETIME = timedelta(days=90)
"""How long a new token lives unless made otherwise (``evalsite token create --expires-in``)."""
MAX_LIFETIME = timedelta(days=3650)
"""The longest lifetime a token may be given (about 10 years; ``never`` is asked for as such)."""


def create_api_token(
    *, user: Any, name: str = "", expires_in: timedelta | None = DEFAULT_LIFETIME, scope: str = Scope.WRITE
) -> tuple[ApiToken, str]:
    """Create a token for ``user`` and return the row and the raw token (shown once).

    The raw token is ``esk_`` + 43 URL-safe characters (256 bits of randomness). It is refused
    from ``expires_in`` after now on (``None``: never expires).

    Raises:
        ValueError: ``expires_in`` is not positive or over :data:`MAX_LIFETIME`, or ``scope`` is not
            read, write or admin.
    """
    if expires_in is not None and expires_in <= timedelta(0):
        raise ValueError("a token's lifetime must be positive")
    if expires_in is not None and expires_in > MAX_LIFETIME:
        raise ValueError(f"a token's lifetime is at most {MAX_LIFETIME.days} days (about 10 years), or never")
    if scope not in Scope.values:
        raise ValueError(f"a token's scope is one of {', '.join(Scope.values)}, not {scope!r}")
    raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user,
        name=name or "token",
        prefix=raw[:PREFIX_CHARS],
        token_hash=ApiToken.hash(raw),
        expires=timezone.now() + expires_in if expires_in is not None else None,
        scope=scope,
    )
    return token, raw


def revoke_api_tokens(prefix: str, *, user: Any = None) -> int:
    """Delete the tokens whose display prefix is ``prefix`` (optionally only ``user``'s).

    Returns:
        How many tokens were revoked (0 when none matched).

    Raises:
        ValueError: An empty prefix (it would match nothing useful and is surely a mistake).
    """
    if not prefix:
        raise ValueError("give the token prefix shown by `evalsite token list`")
    tokens = ApiToken.objects.filter(prefix=prefix[:PREFIX_CHARS])
    if user is not None:
        tokens = tokens.filter(user=user)
    with transaction.atomic():
        deleted, _ = tokens.delete()
    return deleted


def user_for_token(raw: str) -> Any | None:
    """The active user a raw token belongs to, or ``None`` (unknown, revoked, expired, or an
    inactive user). Every way in (API, websockets) asks this one function."""
    if not raw or not raw.startswith(TOKEN_PREFIX) or len(raw) > 200:
        return None
    token = ApiToken.objects.select_related("user").filter(token_hash=ApiToken.hash(raw)).first()
    now = timezone.now()
    if token is None or not token.user.is_active or token.expired(now):
        return None
    if token.last_used is None or now - token.last_used >= LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used=now)
    return _scoped_user(token.user, token.scope)


def _refuse_save(*args: Any, **kwargs: Any) -> None:
    raise RuntimeError("a user loaded through a scoped API token is not saved (its powers are cut for one request)")


def _scoped_user(user: Any, scope: str) -> Any:
    """``user`` (loaded for this request only) with no more power than ``scope`` allows.

    Staff power is ``is_staff`` and roles are permissions (:mod:`apps.core.access`), so below
    ``admin`` the instance loses ``is_staff`` (staff still read: staff see everything), and a
    ``read`` token keeps only ``view_*`` permissions. The instance cannot be saved, so the cut
    never reaches the database.
    """
    user.token_scope = scope
    if scope == Scope.ADMIN:
        return user
    was_staff = bool(user.is_staff)
    full_has_perm = user.has_perm

    def has_perm(perm: str, obj: Any = None) -> bool:
        if scope == Scope.READ and not perm.rpartition(".")[2].startswith("view_"):
            return False
        return bool(full_has_perm(perm, obj)) or (was_staff and perm == VIEW_PERMISSION)

    user.role_powers = _RolePowers(user, is_staff=was_staff, has_perm=full_has_perm)
    user.is_staff = False
    user.has_perm = has_perm
    user.save = _refuse_save
    return user


class _RolePowers:
    """A scoped user seen with its role's powers (``is_staff`` and ``has_perm`` before the cut)."""

    def __init__(self, user: Any, *, is_staff: bool, has_perm: Any) -> None:
        self._user = user
        self.is_staff = is_staff
        self.has_perm = has_perm

    def __getattr__(self, name: str) -> Any:
        return getattr(self._user, name)


def role_powers(user: Any) -> Any:
    """``user`` with what its role allows, whatever its API token's scope cuts: to tell a refusal
    the role explains from one a stronger token would lift."""
    return getattr(user, "role_powers", user)


SCOPE_ORDER = (Scope.READ, Scope.WRITE, Scope.ADMIN)
"""The scopes, weakest first."""


def scope_note(user: Any, *, needs: str = Scope.WRITE) -> str:
    """`` (this API token's scope is S: ...)`` for a user acting through a token weaker than
    ``needs``, to end a refusal with, naming only the scopes that are enough; ``""`` otherwise
    (the token is not the limit: the refusal should name the role, see :func:`role_powers`)."""
    scope = getattr(user, "token_scope", None)
    if scope is None or SCOPE_ORDER.index(Scope(scope)) >= SCOPE_ORDER.index(Scope(needs)):
        return ""
    enough = "|".join(str(s) for s in SCOPE_ORDER[SCOPE_ORDER.index(Scope(needs)) :])
    return f" (this API token's scope is {scope}: `evalsite token create --scope {enough}` for more)"


class BearerTokenAuth(HttpBearer):
    """``Authorization: Bearer esk_...``; sets ``request.user`` so views see one user object."""

    def authenticate(self, request: HttpRequest, token: str) -> Any | None:
        user = user_for_token(token.strip())
        if user is not None:
            request.user = user
        return user


class LoggedInSessionAuth(SessionAuth):
    """Django session auth that answers 401 (not a CSRF 403) to anonymous requests.

    ninja checks CSRF before it looks at the session; an anonymous POST would otherwise fail
    with "CSRF check Failed" instead of the 401 that tells a client to log in.
    """

    def __call__(self, request: HttpRequest) -> Any | None:
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated:
            return None
        return super().__call__(request)


api_auth = [BearerTokenAuth(), LoggedInSessionAuth()]
"""The auth list every API route uses (bearer first; see the module docstring)."""


def _bearer_from_scope(scope: dict[str, Any]) -> str | None:
    for name, value in scope.get("headers") or []:
        if name.lower() == b"authorization":
            kind, _, raw = value.decode("latin-1").partition(" ")
            return raw.strip() if kind.lower() == "bearer" else None
    return None


def websocket_auth(inner: Any) -> Any:
    """ASGI middleware for websockets: who is connecting.

    With ``Authorization: Bearer <token>`` the user is the token's (anonymous when it is
    unknown, revoked or expired, so the consumer refuses it); a token is not an ambient
    credential, so no Origin check is needed. Otherwise the browser's session, behind the
    allowed-hosts Origin check that stops other sites from opening sockets with its cookie.
    """
    from channels.auth import AuthMiddlewareStack
    from channels.db import database_sync_to_async
    from channels.security.websocket import AllowedHostsOriginValidator
    from django.contrib.auth.models import AnonymousUser

    session_stack = AllowedHostsOriginValidator(AuthMiddlewareStack(inner))

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> Any:
        raw = _bearer_from_scope(scope)
        if raw is None:
            return await session_stack(scope, receive, send)
        user = await database_sync_to_async(user_for_token)(raw)
        return await inner({**scope, "user": user or AnonymousUser()}, receive, send)

    return app
