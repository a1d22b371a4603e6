"""Conversation cases in the portal's pages: the case page's transcript (turn by turn, the first
failing turn marked, earlier turns kept when a turn errored), the run table's turn columns and
link, the set page's kind of case, and the compare pages' turn-by-turn alignment and per-turn
flips. Real runs through the ``eval`` command on a set mixing conversations and a single-turn case."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from django.core.management import call_command
from django.urls import reverse

from apps.evals.models import EvalResult, EvalRun, EvalSet
from apps.evals.queries.conversations import first_divergence, turn_flips, turn_statuses

LOOKUP = {"name": "lookup", "arguments": {"q": "two"}}

AGENTS = '''
import asyncio
import os
from pathlib import Path

from evalcore.discovery import target

LOOKUP = {"name": "lookup", "arguments": {"q": "two"}}


def answer(message, session, wrong_turn=None):
    """Upper-cases each message; calls ``lookup`` on "two"; raises on "explode"; a wrong answer
    at ``wrong_turn`` (0-based). A single-turn case (no session) gets its input upper-cased."""
    if session is None:
        return str(message).upper()
    if message == "explode":
        raise RuntimeError("the agent fell over")
    text = message.upper() + ("?!" if session.turn == wrong_turn else "")
    return {"final_response": text, "tool_calls": [LOOKUP] if message == "two" else []}


@target(id="talker", scorers=["exact_match", "tool_calls"])
def talker(message, session):
    return answer(message, session)


@target(id="talker-bad2", scorers=["exact_match", "tool_calls"])
def talker_bad2(message, session):
    return answer(message, session, wrong_turn=1)


@target(id="talker-bad3", scorers=["exact_match", "tool_calls"])
def talker_bad3(message, session):
    return answer(message, session, wrong_turn=2)


@target(id="gated-talker", scorers=["exact_match"])
async def gated_talker(message, session):
    """Plays turn N >= 2 of a conversation once the file ``turn-N`` exists in ``$CONV_GATES``
    (the browser test opens each gate after it saw the turns before it finish, live)."""
    if session is not None and session.turn > 0:
        gate = Path(os.environ["CONV_GATES"]) / f"turn-{session.turn + 1}"
        while not gate.exists():  # bounded by the run's --timeout
            await asyncio.sleep(0.02)
    return answer(message, session)
'''

CASES = [
    {"id": "talk", "split": "dev", "turns": [
        {"user": "one", "final_response": "ONE"},
        {"user": "two", "final_response": "TWO", "tool_calls": [LOOKUP]},
        {"user": "three", "final_response": "THREE"}]},
    {"id": "boom", "split": "dev", "turns": [
        {"user": "one", "final_response": "ONE"},
        {"user": "explode", "final_response": "EXPLODE"},
        {"user": "three", "final_response": "THREE"}]},
    {"id": "single", "split": "dev", "input": "hello", "expected": "HELLO"},
]  # fmt: skip
SET_NAME = "talks"


def write_fixture(folder: Path) -> tuple[Path, Path]:
    """The agents folder and the case bank (``talks.jsonl``) in ``folder``."""
    agents = folder / "agents"
    agents.mkdir()
    (agents / "talkers.py").write_text(AGENTS)
    bank = folder / f"{SET_NAME}.jsonl"
    bank.write_text("".join(json.dumps(c) + "\n" for c in CASES))
    return agents, bank


def run_eval(agents: Path, target: str) -> EvalRun:
    call_command("eval", str(agents), "--set", SET_NAME, "--target", target, "--split", "dev", "--quiet")
    return EvalRun.objects.filter(target_id=target).latest("started")


@pytest.fixture
def runs(tmp_path):
    agents, bank = write_fixture(tmp_path)
    call_command("import", str(bank))
    return {t: run_eval(agents, t) for t in ("talker", "talker-bad2", "talker-bad3")}


def result(run: EvalRun, case_id: str) -> EvalResult:
    return EvalResult.objects.get(eval_run=run, case_id=case_id)


def turn_block(html: str, n: int) -> str:
    match = re.search(rf'<li id="turn-{n}"(.*?)</li>\s*(?=<li id="turn-|</ol>\s*</section>)', html, re.S)
    assert match, f"no turn {n}"
    return match.group(0)


@pytest.mark.django_db(transaction=True)
def test_the_case_page_shows_the_transcript_with_the_first_failing_turn_marked(runs, client, viewer):
    client.force_login(viewer)
    bad = runs["talker-bad2"]
    talk = result(bad, "talk")
    assert talk.status == "failed"
    html = client.get(reverse("evals:result", args=[bad.pk, talk.pk])).content.decode()
    assert "conversation · 3 turns" in html
    assert 'The first failing turn is <a href="#turn-2">turn 2</a>' in html
    first, second, third = (turn_block(html, n) for n in (1, 2, 3))
    assert 'data-status="passed"' in first and "first failing turn" not in first
    assert 'data-status="failed"' in second and "first-failing" in second and "first failing turn" in second
    assert "TWO?!" in second and "<code>lookup</code>" in second  # the answer and its tool call
    assert "Expected vs actual answer" in second and "Expected vs actual tool calls" in second
    assert "exact_match: fail" in second and "tool_calls: pass" in second
    assert 'data-status="passed"' in third


@pytest.mark.django_db(transaction=True)
def test_a_turn_that_errors_keeps_the_earlier_turns_and_marks_the_rest_not_played(runs, client, viewer):
    client.force_login(viewer)
    run = runs["talker"]
    boom = result(run, "boom")
    assert boom.status == "errored"
    html = client.get(reverse("evals:result", args=[run.pk, boom.pk])).content.decode()
    first, second, third = (turn_block(html, n) for n in (1, 2, 3))
    assert "ONE" in first and 'data-status="unscored"' in first  # played and kept; an errored case is not scored
    assert 'data-status="errored"' in second and "first failing turn" in second
    assert "RuntimeError: turn 2: the agent fell over" in second
    assert 'data-status="not played"' in third and "Not played" in third


@pytest.mark.django_db(transaction=True)
def test_the_run_table_says_conversation_and_links_the_first_failing_turn(runs, client, viewer):
    client.force_login(viewer)
    run = runs["talker-bad2"]
    html = client.get(reverse("evals:eval_run", args=[run.pk])).content.decode()
    talk, boom, single = (result(run, c) for c in ("talk", "boom", "single"))
    case_url = reverse("evals:result", args=[run.pk, talk.pk])
    row = re.search(rf'<tr id="result-{talk.pk}">.*?</tr>', html, re.S).group(0)
    assert "conversation · 3 turns" in row
    assert f'href="{case_url}#turn-2">first failing turn 2</a>' in row
    boom_row = re.search(rf'<tr id="result-{boom.pk}">.*?</tr>', html, re.S).group(0)
    assert "first failing turn 2" in boom_row  # the errored turn
    single_row = re.search(rf'<tr id="result-{single.pk}">.*?</tr>', html, re.S).group(0)
    assert "conversation" not in single_row and "first failing" not in single_row
    # a passing conversation names its turns and no failing one
    good = runs["talker"]
    good_html = client.get(reverse("evals:eval_run", args=[good.pk])).content.decode()
    good_row = re.search(rf'<tr id="result-{result(good, "talk").pk}">.*?</tr>', good_html, re.S).group(0)
    assert "conversation · 3 turns" in good_row and "first failing" not in good_row


@pytest.mark.django_db(transaction=True)
def test_a_single_turn_case_page_is_unchanged(runs, client, viewer):
    client.force_login(viewer)
    run = runs["talker"]
    html = client.get(reverse("evals:result", args=[run.pk, result(run, "single").pk])).content.decode()
    assert 'id="transcript"' not in html and "conversation ·" not in html
    assert "<h2>Expected vs actual</h2>" in html


@pytest.mark.django_db(transaction=True)
def test_the_set_page_says_which_cases_are_conversations(runs, client, viewer):
    client.force_login(viewer)
    html = client.get(reverse("evals:set", args=[EvalSet.objects.get(name=SET_NAME).pk])).content.decode()
    rows = {
        m.group(1): m.group(0) for m in re.finditer(r'<tr><td class="mono">(?:<a [^>]*>)?(\w+).*?</tr>', html, re.S)
    }
    assert "conversation · 3 turns" in rows["talk"] and "conversation · 3 turns" in rows["boom"]
    assert "conversation" not in rows["single"]


@pytest.mark.django_db(transaction=True)
def test_compare_aligns_turns_marks_the_first_divergence_and_counts_flips_per_turn(runs, client, viewer):
    client.force_login(viewer)
    a, b = runs["talker"], runs["talker-bad3"]
    url = reverse("evals:compare_case") + f"?a={a.pk}&b={b.pk}&case=talk"
    html = client.get(url).content.decode()
    assert 'The answers first differ at <a href="#turn-3">turn 3</a>' in html
    aligned = re.search(r'<tr id="turn-3".*?</tr>', html, re.S).group(0)
    assert "first-divergence" in aligned and "THREE?!" in aligned and "first difference" in aligned
    assert "first-divergence" not in re.search(r'<tr id="turn-2".*?</tr>', html, re.S).group(0)
    flips = turn_flips(a, b)
    rows = [(f.turn, f.n, f.of, f.a_only, f.b_only) for f in flips]
    assert rows == [(1, 2, 2, 0, 0), (2, 2, 2, 0, 0), (3, 1, 2, 1, 0)]  # "boom" stops at turn 2 in both
    page = client.get(reverse("evals:compare") + f"?a={a.pk}&b={b.pk}").content.decode()
    assert reverse("evals:compare_turns") in page  # the table loads after the page
    page = client.get(reverse("evals:compare_turns") + f"?a={a.pk}&b={b.pk}").content.decode()
    table = re.search(r'<table id="turn-flips".*?</table>', page, re.S).group(0)
    assert re.search(r"<td[^>]*>3</td>\s*<td[^>]*>1/2</td>\s*<td[^>]*>1</td>\s*<td[^>]*>0</td>", table), table


def test_first_divergence_and_turn_statuses_read_the_stored_shapes():
    one = {"final_response": "A", "tool_calls": []}
    assert first_divergence([one, one], [one, one]) is None
    assert first_divergence([one, one], [one, {**one, "final_response": "B"}]) == 2
    assert first_divergence([one, one], [one]) == 2  # one play stopped at an error
    assert first_divergence(None, [one]) == 1
    scores = [{"name": "exact_match", "metadata": {"turns": [{"passed": True}, None, {"passed": False}]}}]
    assert turn_statuses(scores, n_played=3, errored_turn=None) == ["passed", "unscored", "failed"]
    assert turn_statuses([], n_played=1, errored_turn=2) == ["unscored", "errored"]
