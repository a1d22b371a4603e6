"""A target that cannot take the set's input stops early (issue 11): the first K cases all
erroring with one error type -> the run is failed with a plain sentence, not hundreds of errored
cases shown as "finished". Mixed errors, or one case getting through, run to the end."""

from __future__ import annotations

import textwrap

import pytest
from django.core.management import call_command
from django.test import Client

from apps.agents.registry import load_target
from apps.evals.models import EvalRun
from apps.evals.runs.config import RunConfig
from apps.evals.runs.earlystop import DEFAULT_K, early_stop_k
from apps.evals.runs.prepare import prepare_eval_run
from apps.evals.worker.tasks import EXECUTOR, enqueue_eval_run
from tests.apps.evals.test_consumers import roles  # noqa: F401 - autouse: the groups after each flush
from tests.apps.factories import make_eval_set

pytestmark = pytest.mark.django_db(transaction=True)

AGENTS = """
from evalcore.discovery import TargetSpec

def _wants_text(value):
    return value.upper()  # a dict input: AttributeError on every case

def _mixed(value):
    n = int(value["question"].split()[2])
    if n % 2:
        raise ValueError("odd")
    raise KeyError("even")

def _late(value):
    n = int(value["question"].split()[2])
    if n == 25:
        return str(2 * n)
    raise TypeError("not yet")

upper = TargetSpec(id="upper", target=_wants_text, input_kind="text", scorers=["exact_match"])
mixed = TargetSpec(id="mixed", target=_mixed, scorers=["exact_match"])
late = TargetSpec(id="late", target=_late, scorers=["exact_match"])
"""


@pytest.fixture
def agents_dir(tmp_path, settings):
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "hostile.py").write_text(textwrap.dedent(AGENTS))
    settings.EVALSITE_AGENTS_DIR = folder
    return folder


def queue(eval_set, target_id: str, **config) -> EvalRun:
    eval_run = prepare_eval_run(
        eval_set=eval_set,
        spec=load_target(target_id),
        variant=None,
        split="dev",
        allow_test=False,
        # concurrency 1: cases finish in order, so what "the first K" means is exact
        config=RunConfig.parse({"concurrency": 1, "executor": EXECUTOR, **config}),
    )
    enqueue_eval_run(eval_run)
    return eval_run


def work_off_queue() -> None:
    call_command("db_worker", "--batch", "--no-startup-delay", "--no-reload", verbosity=0)


def test_the_first_k_cases_failing_alike_stop_the_run_with_a_plain_sentence(agents_dir):
    eval_set = make_eval_set("big", 60, splits=("dev",))
    eval_run = queue(eval_set, "upper")
    work_off_queue()
    eval_run.refresh_from_db()
    assert eval_run.status == "failed"
    assert eval_run.error.startswith(
        f"target upper raised AttributeError on every case (the first {DEFAULT_K}): it may not accept this set's input."
    )
    # the cases that decided it are kept; the rest never ran
    assert DEFAULT_K <= eval_run.results.count() < 60
    page = Client()
    from django.contrib.auth import get_user_model

    page.force_login(get_user_model().objects.create_superuser("boss", password="x-123456789"))
    body = page.get(f"/runs/{eval_run.pk}/").content.decode()
    assert "it may not accept this set&#x27;s input" in body and ">failed<" in body


def test_k_is_configurable_and_mixed_errors_or_a_late_success_run_to_the_end(agents_dir):
    eval_set = make_eval_set("big", 30, splits=("dev",))
    short = queue(eval_set, "upper", early_stop=3)
    off = queue(eval_set, "upper", early_stop=0)
    mixed = queue(eval_set, "mixed")
    late = queue(eval_set, "late", early_stop=26)
    work_off_queue()
    for run in (short, off, mixed, late):
        run.refresh_from_db()
    assert short.status == "failed" and "(the first 3)" in short.error and short.results.count() < 30
    assert (off.status, off.n_errored) == ("finished", 30)
    assert (mixed.status, mixed.n_errored) == ("finished", 30)
    # c25 (the 26th case) succeeds: the first 26 are not all errors
    assert (late.status, late.n_passed, late.n_errored) == ("finished", 1, 29)


def test_early_stop_defaults(monkeypatch):
    assert early_stop_k({"executor": "task"}) == DEFAULT_K
    assert early_stop_k({"executor": "cli"}) == 0  # the CLI reports every case
    assert early_stop_k({"executor": "cli", "early_stop": 5}) == 5
    monkeypatch.setenv("EVALSITE_EARLY_STOP", "0")
    assert early_stop_k({"executor": "task"}) == 0


def test_start_run_form_warns_when_the_target_input_kind_differs_from_the_sets_inputs(agents_dir, member):
    eval_set = make_eval_set("objects", 3, splits=("dev",))  # inputs are JSON objects
    client = Client()
    client.force_login(member)
    form = client.get("/runs/new/").content.decode()
    assert 'id="input-kind-warning"' in form and 'hx-get="/runs/new/check/"' in form
    warned = client.get("/runs/new/check/", {"eval_set": eval_set.pk, "target": "upper"}).content.decode()
    assert "Target upper declares input_kind=text: it takes text (a string)" in warned
    assert "the inputs of set objects are JSON values" in warned
    # a target taking what the set holds (the default conversation kind vs messages): no warning
    from apps.evals.models import EvalCase

    EvalCase.objects.filter(eval_set=eval_set).update(input=[{"role": "user", "content": "hi"}])
    quiet = client.get("/runs/new/check/", {"eval_set": eval_set.pk, "target": "mixed"}).content.decode()
    assert "declares" not in quiet
    # a refused post shows the same warning with the form
    refused = client.post("/runs/new/", {"eval_set": eval_set.pk, "target": "upper", "split": "test"})
    assert refused.status_code == 200 and "declares input_kind=text" in refused.content.decode()
