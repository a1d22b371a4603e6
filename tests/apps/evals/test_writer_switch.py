"""The result writer shortens the interpreter's thread switch interval while its thread runs, so
the engine's event loop gets the GIL back within half a millisecond (issue 30's latency floor),
and puts the host's interval back when the last writer stops."""

from __future__ import annotations

import sys

import pytest
from django.utils import timezone

from apps.evals.models import EvalRun, EvalRunStatus, EvalSet
from apps.evals.results.writer import _SWITCH_S, DjangoEvalStore

pytestmark = pytest.mark.django_db(transaction=True)


def _store() -> DjangoEvalStore:
    eval_set = EvalSet.objects.create(name=f"switch-{EvalSet.objects.count()}")
    run = EvalRun.objects.create(eval_set=eval_set, target_id="t", status=EvalRunStatus.RUNNING, started=timezone.now())
    return DjangoEvalStore(target_id="t", eval_run_id=run.id)


def test_the_interval_is_short_while_writers_run_and_restored_after_the_last_one():
    before = sys.getswitchinterval()
    first, second = _store(), _store()
    try:
        first.start()
        assert sys.getswitchinterval() == pytest.approx(min(before, _SWITCH_S), abs=2e-6)
        second.start()
        first.close()
        assert sys.getswitchinterval() == pytest.approx(min(before, _SWITCH_S), abs=2e-6)  # one writer still runs
        second.close()
        assert sys.getswitchinterval() == pytest.approx(before, abs=2e-6)
        second.close()  # a second close changes nothing
        assert sys.getswitchinterval() == pytest.approx(before, abs=2e-6)
    finally:
        first.close()
        second.close()
        sys.setswitchinterval(before)


def test_a_shorter_interval_set_by_the_host_is_kept():
    before = sys.getswitchinterval()
    sys.setswitchinterval(0.0001)
    store = _store()
    try:
        store.start()
        assert sys.getswitchinterval() == pytest.approx(0.0001, abs=2e-6)
        store.close()
        assert sys.getswitchinterval() == pytest.approx(0.0001, abs=2e-6)
    finally:
        store.close()
        sys.setswitchinterval(before)
