"""A run's human name (issue 26): given by the person who starts it, else made from its set,
target, variant, split and its number among the runs of that (set, target, variant, split).

The hex id stays the run's address (URLs, ``--resume``, the API); the name is what people read
and can edit. The rule lives here once: every entry point that creates a run (``prepare``, a
rescore, an Inspect import) calls :func:`create_numbered_run`, a rename to "" restores the rule's
name (:func:`default_run_name`), and the migration that backfilled old rows calls
:func:`auto_run_name`.
"""

from __future__ import annotations

import unicodedata
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Max

from apps.core.storable import unstorable_reason
from apps.evals.models import EvalRun, EvalSet
from evalcore.errors import InvalidInputError

SEPARATOR = " · "
MAX_NAME_CHARS = 200
"""The ``EvalRun.name`` column's length; a made name is cut to it."""
_ATTEMPTS = 10
"""How often a number taken by a concurrent create is retried with the next one."""


def auto_run_name(*, set_name: str, target_id: str, variant: str, split: str, number: int) -> str:
    """The name made for a run nobody named: ``set · target/variant · split · #number``.

    ``gsm8k_test · gsm8k-replay/6b · dev · #3``; without a variant ``qa · echo · dev · #1``. Cut
    to 200 characters (the column's length). A plain function of strings, so the migration that
    backfilled old rows uses it too.
    """
    target = f"{target_id}/{variant}" if variant else target_id
    return SEPARATOR.join((set_name, target, split, f"#{number}"))[:MAX_NAME_CHARS]


def check_name(text: str) -> str:
    """A name as given (a form, the API, ``--name``), stripped.

    Raises:
        InvalidInputError: Over 200 characters, or holding a control character (line break, tab,
            terminal escape), a NUL character or a lone surrogate (``field="name"``).
    """
    if (reason := unstorable_reason(text)) is not None:
        raise InvalidInputError(f"name {reason}", field="name")
    name = text.strip()
    if len(name) > MAX_NAME_CHARS:
        raise InvalidInputError(f"name is over {MAX_NAME_CHARS} characters ({len(name)})", field="name")
    control = next((c for c in name if unicodedata.category(c) == "Cc"), None)
    if control is not None:  # a line break splits the CLI's lines, an escape code drives the terminal
        raise InvalidInputError(f"name may not hold a control character ({control!r}): one line of text", field="name")
    return name


def default_run_name(eval_run: EvalRun) -> str:
    """:func:`auto_run_name` of a stored run (its set is read when not already loaded)."""
    return auto_run_name(
        set_name=eval_run.eval_set.name,
        target_id=eval_run.target_id,
        variant=eval_run.variant,
        split=eval_run.split,
        number=eval_run.number,
    )


def next_run_number(*, eval_set: EvalSet, target_id: str, variant: str, split: str) -> int:
    """1 + the highest number among the runs of this (set, target, variant, split); 1 for the first.

    One indexed read (``evalrun_set_target_variant``). A number freed by deleting the latest run
    is given again; numbers of runs that still exist never are.
    """
    top = EvalRun.objects.filter(eval_set=eval_set, target_id=target_id, variant=variant, split=split).aggregate(
        top=Max("number")
    )["top"]
    return (top or 0) + 1


def create_numbered_run(*, name: str | None = None, **fields: Any) -> EvalRun:
    """Create an ``EvalRun`` with the next number of its (set, target, variant, split) and its name.

    ``fields`` are the model's fields (``eval_set``, ``target_id``, ``variant``, ``split`` needed);
    ``name`` (stripped; ``None`` or blank: the rule's name) is stored as given. Two runs created
    at once for the same key cannot share a number (a unique constraint): the loser retries with
    the next one, in a savepoint, up to ten times.

    Raises:
        InvalidInputError: ``name`` over 200 characters, or holding a NUL or a lone surrogate.
        IntegrityError: The number was still taken after ten attempts.
    """
    given = check_name(name) if name is not None else ""
    key = {k: fields[k] for k in ("target_id", "split")} | {"variant": fields.get("variant", "")}
    eval_set: EvalSet = fields["eval_set"]
    for attempt in range(_ATTEMPTS):
        number = next_run_number(eval_set=eval_set, **key)
        made = given or auto_run_name(set_name=eval_set.name, number=number, **key)
        try:
            with transaction.atomic():
                return EvalRun.objects.create(number=number, name=made, **fields)
        except IntegrityError:
            if attempt == _ATTEMPTS - 1 or not _number_taken(eval_set, number, key):
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def _number_taken(eval_set: EvalSet, number: int, key: dict[str, str]) -> bool:
    return EvalRun.objects.filter(eval_set=eval_set, number=number, **key).exists()
