"""Who may do what. Roles are Django groups on permissions (see migration 0002_roles):

* viewer: reads everything (``evals.view_evalrun`` and friends);
* member: also starts runs, uses the playground, captures cases;
* staff: authors sets and cases in the admin.
"""

from __future__ import annotations

from typing import Any

VIEW_PERMISSION = "evals.view_evalrun"
RUN_PERMISSION = "evals.start_evalrun"
PLAYGROUND_PERMISSION = "evals.use_playground"
CAPTURE_PERMISSION = "evals.capture_case"


def can_view(user: Any) -> bool:
    return bool(user and user.is_authenticated and (user.is_staff or user.has_perm(VIEW_PERMISSION)))


def can_start_runs(user: Any) -> bool:
    return bool(user and user.is_authenticated and user.has_perm(RUN_PERMISSION))


def can_use_playground(user: Any) -> bool:
    return bool(user and user.is_authenticated and user.has_perm(PLAYGROUND_PERMISSION))


def can_capture(user: Any) -> bool:
    return bool(user and user.is_authenticated and user.has_perm(CAPTURE_PERMISSION))
