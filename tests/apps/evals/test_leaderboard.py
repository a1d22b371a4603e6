"""The leaderboard per set and split (issue 27): the latest finished whole-split run per (target,
variant), pass rate and scores with intervals and coverage, cost and latency per case, model and
set version; runs on an older set version marked and listed apart; on the set page and in the API."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from apps.evals.models import EvalRun, EvalSet
from apps.evals.queries.leaderboard import latest_finished_runs, leaderboard
from apps.evals.runs.naming import create_numbered_run

AGENT = textwrap.dedent(
    """
    from evalcore.discovery import TargetSpec
    from evalcore.types import TargetOutput

    def good(text):
        return TargetOutput(output=text.upper(), model="m-good")

    def half(text):
        return text.upper() if text in ("a", "b", "c", "d") else "?"

    def none_right(text):
        return "?"

    echo = TargetSpec(id="echo", variants={"good": good, "half": half, "none": none_right}, scorers=["exact_match"])
    """
)


@pytest.fixture
def project(tmp_path: Path, settings: Any) -> tuple[Path, Path]:
    settings.DATA_DIR = tmp_path / "data"
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "echo.py").write_text(AGENT)
    cases = tmp_path / "qa.jsonl"
    write_cases(cases, "abcdefgh")
    return agents, cases


def write_cases(path: Path, words: str) -> None:
    rows = [{"id": f"q{i}", "input": w, "expected": w.upper(), "split": "dev"} for i, w in enumerate(words)]
    rows.append({"id": "t0", "input": "z", "expected": "Z", "split": "train"})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def evalsite_eval(project: tuple[Path, Path], *args: str) -> None:
    agents, cases = project
    call_command("eval", str(agents), "--set", str(cases), "--quiet", *args)


@pytest.mark.django_db(transaction=True)
def test_the_board_ranks_the_latest_run_of_each_variant_and_marks_older_set_versions(
    project: tuple[Path, Path], viewer: User, capsys: pytest.CaptureFixture[str]
) -> None:
    for variant in ("none", "half", "good"):
        evalsite_eval(project, "--variant", variant)
    evalsite_eval(project, "--variant", "half", "--cache-target")
    evalsite_eval(project, "--variant", "half", "--cache-target")  # the latest half: every case cached
    evalsite_eval(project, "--variant", "good", "--split", "train")
    eval_set = EvalSet.objects.get(name="qa")
    latest_half = EvalRun.objects.filter(variant="half", split="dev").order_by("-finished").first()
    assert latest_half is not None
    # stored as the run ended, so the board reads no result of it
    assert latest_half.summary["target_cache"] == {"cached": 8, "n_ms": 0, "sum_ms": None, "sum_sq": None}
    # a run of chosen cases only (a one-case re-run) finished later: not a contender
    rerun = create_numbered_run(
        eval_set=eval_set, target_id="echo", variant="half", split="dev", config={"case_ids": ["q0"]}
    )
    EvalRun.objects.filter(pk=rerun.pk).update(status="finished", finished=latest_half.finished, n_done=1, n_passed=1)

    with CaptureQueriesContext(connection) as queries:
        board = leaderboard(eval_set, "dev")
    assert len(queries) <= 20  # one query for the runs, the rest grouped: not one per case
    assert [r.variant for r in board.rows] == ["good", "half", "none"]
    assert [r.stale for r in board.rows] == [False, False, False] and board.stale == []
    good, half, none = board.rows
    assert good.pass_rate == 1.0 and good.coverage == "n = 8/8" and good.model == "m-good"
    assert good.pass_interval.method == "wilson" and good.pass_interval.low is not None and good.pass_interval.low < 1.0
    assert half.eval_run_id == latest_half.pk and half.pass_rate == 0.5 and half.n_cached == 8
    assert half.latency is None  # every case came from the cache: no time to show
    assert none.pass_rate == 0.0 and none.latency is not None and none.latency.n == 8
    assert [c.name for c in good.scores] == ["exact_match"] and good.scores[0].n == 8
    assert board.splits == ["dev", "train"] and good.set_version == board.current_version == 1

    # the set changes: the runs made before are on an older version, listed apart, never ranked
    write_cases(project[1], "abcdefgi")
    evalsite_eval(project, "--variant", "none")
    capsys.readouterr()
    board = leaderboard(eval_set, "dev")
    assert [(r.variant, r.set_version) for r in board.rows] == [("none", 2)]
    assert [(r.variant, r.stale) for r in board.stale] == [("half", True), ("good", True)]

    client = Client()
    client.force_login(viewer)
    api = client.get(f"/api/eval/sets/{eval_set.pk}/leaderboard?split=dev")
    assert api.status_code == 200, api.content
    data = api.json()
    assert data["current_version"] == 2 and [r["variant"] for r in data["rows"]] == ["none"]
    stale_good = next(r for r in data["stale"] if r["variant"] == "good")
    assert stale_good["pass_rate"] == 1.0 and stale_good["coverage"] == "n = 8/8" and stale_good["set_version"] == 1
    assert stale_good["pass_rate_interval"]["method"] == "wilson"
    assert stale_good["latency_ms"]["coverage"] == "n = 8/8"
    assert client.get(f"/api/eval/sets/{eval_set.pk}/leaderboard?split=nope").status_code == 400

    page = client.get(f"/sets/{eval_set.pk}/leaderboard/?split=dev").content.decode()
    assert 'id="leaderboard"' in page and "older version" in page and "echo / good" in page
    assert "8 cached left out" in page or "(8 cached)" in page
    set_page = client.get(f"/sets/{eval_set.pk}/").content.decode()
    assert f"/sets/{eval_set.pk}/leaderboard/?split=dev" in set_page

    call_command("leaderboard", "qa", "--json")
    assert json.loads(capsys.readouterr().out)["rows"][0]["variant"] == "none"
    call_command("leaderboard", "qa")
    out = capsys.readouterr().out
    assert "echo / none" in out and "(older)" in out and "ran on an older set version" in out


@pytest.mark.django_db
def test_no_finished_run_is_an_empty_board_not_an_error() -> None:
    eval_set = EvalSet.objects.create(name="empty")
    create_numbered_run(eval_set=eval_set, target_id="t", variant="v", split="dev")  # queued, never finished
    assert latest_finished_runs(eval_set, "dev") == []
    board = leaderboard(eval_set, "dev")
    assert board.rows == [] and board.stale == [] and board.current_version is None
