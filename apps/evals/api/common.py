"""What every route of the evals API shares: who the caller is, the role checks, the error
answers each route documents, and the "one row or 404" lookup."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db.models import Model, QuerySet
from django.http import HttpRequest

from apps.core import access
from apps.core.auth import role_powers, scope_note
from apps.evals.api.schemas import ApiError, ErrorOut
from evalcore.errors import NotFoundError

ERRORS: dict[int, Any] = {400: ErrorOut, 401: ErrorOut, 403: ErrorOut, 404: ErrorOut, 422: ErrorOut}
READ_ERRORS = {k: v for k, v in ERRORS.items() if k != 400}


def api_user(request: HttpRequest) -> Any:
    """The caller: the API token's user, else the session's."""
    return getattr(request, "auth", None) or request.user


def require_view(request: HttpRequest) -> Any:
    """The caller, once they may read eval runs (viewer role); else a 403."""
    user = api_user(request)
    if not access.can_view(user):
        raise ApiError(403, "your account has no role that can read eval runs (ask for viewer)")  # any scope reads
    return user


def require(request: HttpRequest, check: Callable[[Any], bool], action: str) -> Any:
    """The caller when ``check(caller)``; else a 403 saying only members can do ``action``: that
    the caller's role is not enough (naming the user), or that the API token's scope is not."""
    user = api_user(request)
    if not check(user):
        if not check(role_powers(user)):
            raise ApiError(403, f"only members can {action}: user {user.username!r} is not a member")
        raise ApiError(403, f"only members can {action}" + scope_note(user))
    return user


def get_or_404(source: type[Model] | QuerySet[Any], field: str, **lookup: Any) -> Any:
    """The one row matching ``lookup``.

    Raises:
        NotFoundError: No such row (naming ``field``).
    """
    qs = source if isinstance(source, QuerySet) else source._default_manager.all()
    obj = qs.filter(**lookup).first()
    if obj is None:
        value = next(iter(lookup.values()))
        raise NotFoundError(f"no {qs.model._meta.verbose_name} with id {value!r}", field=field)
    return obj
