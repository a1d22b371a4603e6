"""Runs people can tell apart (issue 26): a name given (``--name``, the form, the API) or made
from set, target, variant, split and a counter per (set, target, variant, split); editable; the
hex id stays the address. Old rows were numbered and named by migration 0024."""

from __future__ import annotations

import importlib
import json
import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.apps import apps as django_apps
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.test import Client
from django.urls import reverse

from apps.evals.models import EvalRun, EvalSet
from apps.evals.runs.edits import edit_eval_run
from apps.evals.runs.naming import auto_run_name, create_numbered_run, next_run_number
from evalcore.errors import InvalidInputError
from tests.apps.factories import make_eval_run, make_eval_set

pytestmark = pytest.mark.django_db


def new_run(
    eval_set: EvalSet, *, target_id: str = "echo", variant: str = "v1", split: str = "dev", name: str | None = None
) -> EvalRun:
    return create_numbered_run(name=name, eval_set=eval_set, target_id=target_id, variant=variant, split=split)


def test_the_rule_joins_set_target_variant_split_and_the_number() -> None:
    made = auto_run_name(set_name="gsm8k_test", target_id="gsm8k-replay", variant="6b", split="dev", number=3)
    assert made == "gsm8k_test · gsm8k-replay/6b · dev · #3"
    assert auto_run_name(set_name="qa", target_id="echo", variant="", split="all", number=1) == "qa · echo · all · #1"
    assert len(auto_run_name(set_name="s" * 300, target_id="t", variant="", split="dev", number=1)) == 200


def test_the_counter_is_per_set_target_variant_and_split() -> None:
    qa, other = make_eval_set("qa", 3), make_eval_set("other", 3)
    names = [new_run(qa).name, new_run(qa).name, new_run(qa, variant="v2").name, new_run(qa, split="test").name]
    names += [new_run(qa, target_id="shout").name, new_run(other).name, new_run(qa).name]
    assert names == [
        "qa · echo/v1 · dev · #1",
        "qa · echo/v1 · dev · #2",
        "qa · echo/v2 · dev · #1",
        "qa · echo/v1 · test · #1",
        "qa · shout/v1 · dev · #1",
        "other · echo/v1 · dev · #1",
        "qa · echo/v1 · dev · #3",
    ]
    # a given name is kept; the run still takes its number, so the next made name counts it
    named = new_run(qa, name="  prompt v7  ")
    assert (named.name, named.number) == ("prompt v7", 4)
    assert next_run_number(eval_set=qa, target_id="echo", variant="v1", split="dev") == 5
    assert len(EvalRun.objects.get(pk=named.pk).pk) == 16  # the hex id stays the address


def test_a_name_too_long_or_with_a_nul_is_refused_before_anything_is_written() -> None:
    qa = make_eval_set("qa", 3)
    with pytest.raises(InvalidInputError, match="name is over 200 characters"):
        new_run(qa, name="x" * 201)
    with pytest.raises(InvalidInputError, match="name"):
        new_run(qa, name="a\x00b")
    assert not EvalRun.objects.exists()


def test_renaming_keeps_the_id_and_a_blank_name_brings_the_made_one_back() -> None:
    qa = make_eval_set("qa", 3)
    run = new_run(qa)
    edit_eval_run(run, name="baseline prompt")
    assert EvalRun.objects.get(pk=run.pk).name == "baseline prompt"
    edit_eval_run(run, name="   ")
    assert EvalRun.objects.get(pk=run.pk).name == "qa · echo/v1 · dev · #1"


def test_the_migration_numbers_old_runs_by_start_and_names_only_the_unnamed() -> None:
    qa = make_eval_set("qa", 4)
    first = make_eval_run(qa, [True])
    assert first.started is not None
    second = make_eval_run(qa, [True], started=first.started + timedelta(days=365))
    other_split = make_eval_run(qa, [True], split="dev")
    EvalRun.objects.filter(pk=second.pk).update(name="kept")
    assert set(EvalRun.objects.values_list("number", flat=True)) == {0}  # as rows written before 0024
    migration = importlib.import_module("apps.evals.migrations.0024_run_numbers_names")
    migration.number_and_name(django_apps, None)
    got = {r.pk: (r.number, r.name) for r in EvalRun.objects.all()}
    assert got == {
        first.pk: (1, "qa · echo/v1 · all · #1"),
        second.pk: (2, "kept"),
        other_split.pk: (1, "qa · echo/v1 · dev · #1"),
    }
    # new runs count on from the backfilled numbers
    assert new_run(qa, split="all").name == "qa · echo/v1 · all · #3"


AGENT = """
from evalcore.discovery import TargetSpec
shout = TargetSpec(id="shout", target=lambda text: text.upper(), scorers=["exact_match"])
adder = TargetSpec(id="adder", variants={"right": lambda q: "0"}, scorers=["exact_match"])
"""


@pytest.fixture
def cli_setup(tmp_path: Path) -> tuple[Path, Path]:
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "shout.py").write_text(AGENT)
    cases = tmp_path / "qa.jsonl"
    rows = [{"id": f"c{i}", "input": "a", "expected": "A", "split": "dev"} for i in range(3)]
    cases.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return agents, cases


@pytest.mark.django_db(transaction=True)  # the CLI's result writer commits from its own thread
def test_the_cli_names_a_run_with_name_or_by_the_rule_and_reports_it(
    cli_setup: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agents, cases = cli_setup
    report = tmp_path / "report.json"
    call_command(
        "eval",
        str(agents),
        "--set",
        str(cases),
        "--target",
        "shout",
        "--quiet",
        "--name",
        "nightly",
        "--json",
        str(report),
    )
    out = capsys.readouterr().out
    run = EvalRun.objects.get()
    assert run.name == "nightly" and "run nightly" in out
    assert json.loads(report.read_text())["eval_run"]["name"] == "nightly"
    call_command("eval", str(agents), "--set", str(cases), "--target", "shout", "--quiet")
    latest = EvalRun.objects.exclude(pk=run.pk).get()
    assert latest.name == "qa · shout · dev · #2" and "run qa · shout · dev · #2" in capsys.readouterr().out


def test_the_cli_refuses_a_too_long_name_naming_the_flag(cli_setup: tuple[Path, Path]) -> None:
    agents, cases = cli_setup
    with pytest.raises(CommandError, match="--name: name is over 200 characters"):
        call_command("eval", str(agents), "--set", str(cases), "--target", "shout", "--quiet", "--name", "x" * 201)
    assert not EvalRun.objects.exists()


def test_the_start_run_form_takes_a_name(
    client: Client, member: User, cli_setup: tuple[Path, Path], settings: Any
) -> None:
    settings.EVALSITE_AGENTS_DIR = cli_setup[0]
    qa = make_eval_set("qa", 9)
    client.force_login(member)
    form = {"eval_set": qa.pk, "target": "adder", "variant": "right", "split": "dev"}
    client.post(reverse("evals:start_eval_run"), {**form, "name": "from the form"})
    client.post(reverse("evals:start_eval_run"), form)
    assert sorted(EvalRun.objects.values_list("name", flat=True)) == ["from the form", "qa · adder/right · dev · #2"]


def test_the_api_starts_a_run_with_a_name_or_the_made_one_and_renames_it(
    member: User, viewer: User, cli_setup: tuple[Path, Path], settings: Any
) -> None:
    settings.EVALSITE_AGENTS_DIR = cli_setup[0]
    qa = make_eval_set("qa", 9)
    client = Client()
    client.force_login(member)
    request = {"set_id": qa.pk, "target_id": "adder", "variant": "right", "split": "dev"}
    named = client.post("/api/eval/runs", {**request, "name": "api run"}, content_type="application/json")
    made = client.post("/api/eval/runs", request, content_type="application/json")
    assert (named.status_code, made.status_code) == (201, 201)
    assert named.json()["name"] == "api run" and made.json()["name"] == "qa · adder/right · dev · #2"
    too_long = client.post("/api/eval/runs", {**request, "name": "x" * 201}, content_type="application/json")
    assert too_long.status_code == 422 and EvalRun.objects.count() == 2
    run_id = made.json()["id"]
    renamed = client.patch(f"/api/eval/runs/{run_id}", {"name": "renamed"}, content_type="application/json")
    assert renamed.status_code == 200 and renamed.json()["name"] == "renamed"
    listed = client.get(f"/api/eval/runs?set_id={qa.pk}").json()["items"]
    assert sorted(r["name"] for r in listed) == ["api run", "renamed"]
    viewer_client = Client()
    viewer_client.force_login(viewer)
    refused = viewer_client.patch(f"/api/eval/runs/{run_id}", {"name": "x"}, content_type="application/json")
    assert refused.status_code == 403 and EvalRun.objects.get(pk=run_id).name == "renamed"


@pytest.mark.django_db(transaction=True)
def test_a_resume_keeps_the_run_s_name(cli_setup: tuple[Path, Path]) -> None:
    agents, cases = cli_setup
    call_command("eval", str(agents), "--set", str(cases), "--target", "shout", "--quiet", "--name", "first")
    run = EvalRun.objects.get()
    EvalRun.objects.filter(pk=run.pk).update(status="interrupted")
    with pytest.raises(CommandError, match="drop --name"):
        call_command("eval", str(agents), "--resume", run.pk, "--quiet", "--name", "another")
    assert EvalRun.objects.get(pk=run.pk).name == "first"


@pytest.mark.django_db(transaction=True)
def test_runs_created_at_once_never_share_a_number() -> None:
    """Two threads create runs of one (set, target, variant, split) at the same time: both read
    the same highest number, one insert loses on the unique constraint and takes the next."""
    qa = make_eval_set("qa", 3)
    start = threading.Barrier(2)
    failures: list[BaseException] = []

    def create_many() -> None:
        try:
            start.wait()
            for _ in range(15):
                new_run(qa)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            failures.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=create_many) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    numbers = sorted(EvalRun.objects.values_list("number", flat=True))
    assert numbers == list(range(1, 31))
    assert len(set(EvalRun.objects.values_list("name", flat=True))) == 30
