"""Who may do what. Roles are Django groups on permissions (see migration 0002_roles):

* viewer: reads everything (``evals.view_evalrun`` and friends);
* member: also starts runs, uses the playground, captures cases, reviews results;
* staff: authors sets and cases in the admin.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest


class AuthenticatedRequest(HttpRequest):
    """A request behind a login check (:func:`role_required`): ``user`` is a signed-in user.
    Only for type checkers; at run time it is the ``HttpRequest`` Django passes."""

    user: User


VIEW_PERMISSION = "evals.view_evalrun"
RUN_PERMISSION = "evals.start_evalrun"
PLAYGROUND_PERMISSION = "evals.use_playground"
CAPTURE_PERMISSION = "evals.capture_case"
REVIEW_PERMISSION = "evals.review_result"


def can_view(user: Any) -> bool:
    return bool(user and user.is_authenticated and (user.is_staff or user.has_perm(VIEW_PERMISSION)))


def can_start_runs(user: Any) -> bool:
    return bool(user and user.is_authenticated and user.has_perm(RUN_PERMISSION))


def can_use_playground(user: Any) -> bool:
    return bool(user and user.is_authenticated and user.has_perm(PLAYGROUND_PERMISSION))


def can_capture(user: Any) -> bool:
    return bool(user and user.is_authenticated and user.has_perm(CAPTURE_PERMISSION))


def can_review(user: Any) -> bool:
    """Members (and superusers) grade results; viewers only read reviews."""
    return bool(user and user.is_authenticated and user.has_perm(REVIEW_PERMISSION))


def role_required(check: Callable[[Any], bool], refusal: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """View decorator: login (else a redirect to the login page), then ``check(user)`` (else a
    403 whose page shows ``refusal``)."""

    def decorate(view: Callable[..., Any]) -> Callable[..., Any]:
        @login_required
        @wraps(view)
        def wrapped(request: Any, *args: Any, **kwargs: Any) -> Any:
            if not check(request.user):
                raise PermissionDenied(refusal)
            return view(request, *args, **kwargs)

        return wrapped

    return decorate


viewer_required = role_required(can_view, "you need the viewer role to see eval runs")
member_required = role_required(can_start_runs, "you need the member role to start runs")
playground_required = role_required(can_use_playground, "you need the member role to use the playground")
