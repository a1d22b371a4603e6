"""Conversation cases in the browser: the case page's transcript with the failing turn marked,
the run table's link landing on that turn, and compare's turn-by-turn alignment marking the
first turn where two runs differ (screenshot ``screenshots/conversation_transcript.png``).

The data are made with the CLI on the running site's database, as a user would: the set and
agents of ``tests/apps/evals/test_conversation_pages.py`` (a three-turn conversation, one that
errors at turn 2, one single-turn case), evaluated by ``talker`` (all right), ``talker-bad2``
(wrong at turn 2) and ``talker-bad3`` (wrong at turn 3).
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.apps.evals.test_conversation_pages import SET_NAME, write_fixture
from tests.e2e.conftest import (
    EVALSITE,
    REPO,
    SCREENSHOTS,
    Site,
    clean_env,
    evalsite,
    login,
    once_per_site,
    open_context,
    shot,
)
from tests.support.databases import subprocess_db_env

TARGETS = ("talker", "talker-bad2", "talker-bad3")


def cli_env(site: Site, agents: Path, **extra: str) -> dict[str, str]:
    """The environment of a CLI command on the running site's database."""
    return clean_env(
        **subprocess_db_env(site.db),
        EVALSITE_DATA_DIR=str(site.db.parent / "var"),
        EVALSITE_AGENTS_DIR=str(agents),
        DJANGO_SETTINGS_MODULE="evalsite.settings",
        **extra,
    )


def run_id_of(target: str, env: dict[str, str], site: Site) -> str:
    """The id of the newest eval run of ``target`` ("" when there is none yet)."""
    code = (
        "from apps.evals.models import EvalRun; "
        f"r = EvalRun.objects.filter(target_id={target!r}).order_by('-started').first(); "
        "print('run-id', r.pk if r else '')"
    )
    return evalsite("shell", "--no-imports", "-c", code, env=env, log=site.log).split("run-id", 1)[-1].strip()


@pytest.fixture(scope="module")
def agents(site: Site, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The agents folder of the conversation targets, their set imported into the site (once per site)."""
    return once_per_site(site, "conversation_agents", lambda: _import_conversations(site, tmp_path_factory))


def _import_conversations(site: Site, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder, bank = write_fixture(tmp_path_factory.mktemp("conversations"))
    evalsite("import", str(bank), env=cli_env(site, folder), log=site.log)
    return folder


@pytest.fixture(scope="module")
def conversation_runs(site: Site, agents: Path) -> dict[str, str]:
    """``{target: eval run id}`` of the three CLI runs on the conversation set (made once per site)."""
    return once_per_site(site, "conversation_runs", lambda: _run_conversations(site, agents))


def _run_conversations(site: Site, agents: Path) -> dict[str, str]:
    env = cli_env(site, agents)
    for target in TARGETS:
        evalsite("eval", str(agents), "--set", SET_NAME, "--target", target, "--split", "dev", "--quiet",
                 env=env, log=site.log)  # fmt: skip
    code = (
        "from apps.evals.models import EvalRun; "
        f"print(*(f'{{t}}={{EvalRun.objects.filter(target_id=t).latest(\"started\").pk}}' for t in {TARGETS!r}))"
    )
    out = evalsite("shell", "--no-imports", "-c", code, env=env, log=site.log)
    return dict(pair.split("=", 1) for pair in out.split())


@pytest.fixture
def wide_viewer(browser: Browser, site: Site) -> Iterator[Page]:
    """A viewer's page at 1440 px (the documented screenshot width)."""
    context = open_context(browser, site)
    page = context.new_page()
    page.set_viewport_size({"width": 1440, "height": 1000})
    login(page, "viewer")
    yield page
    context.close()


def test_the_run_table_links_the_failing_turn_and_the_transcript_marks_it(
    wide_viewer: Page, conversation_runs: dict[str, str]
) -> None:
    page = wide_viewer
    page.goto(f"/runs/{conversation_runs['talker-bad2']}/")
    row = page.locator("#results-body tr", has=page.get_by_role("link", name="talk", exact=True))
    expect(row).to_contain_text("conversation · 3 turns")
    row.get_by_role("link", name="first failing turn 2").click()
    page.wait_for_url(re.compile(r"/cases/\d+/#turn-2$"))
    transcript = page.locator("#transcript")
    expect(transcript.locator("ol.turns > li")).to_have_count(3)
    second = page.locator("#turn-2")
    expect(second).to_have_class(re.compile(r"\bfirst-failing\b"))
    expect(second.get_by_role("heading", name=re.compile(r"^Turn 2\b"))).to_contain_text("first failing turn")
    expect(second).to_have_attribute("data-status", "failed")
    expect(second).to_be_in_viewport()  # the link landed on the turn
    for n in (1, 3):
        expect(page.locator(f"#turn-{n}")).to_have_attribute("data-status", "passed")
        expect(page.locator(f"#turn-{n}")).not_to_have_class(re.compile(r"\bfirst-failing\b"))
    expect(page.locator("#first-failing")).to_contain_text("turn 2")
    shot(page, "conversation_page")
    # the transcript alone, 1440 px wide, in a window tall enough that the sticky top bar stays out of it
    SCREENSHOTS.mkdir(exist_ok=True)
    page.set_viewport_size({"width": 1440, "height": 2600})
    page.evaluate("window.scrollTo(0, 0)")
    transcript.screenshot(path=str(SCREENSHOTS / "conversation_transcript.png"))


def test_compare_marks_the_first_turn_where_two_runs_differ(
    wide_viewer: Page, conversation_runs: dict[str, str]
) -> None:
    page = wide_viewer
    a, b = conversation_runs["talker"], conversation_runs["talker-bad3"]
    page.goto(f"/compare/?a={a}&b={b}")
    expect(page.locator("#turn-flips tr[data-turn='3'] td").nth(2)).to_have_text("1")
    page.get_by_role("link", name="talk", exact=True).click()
    page.wait_for_url(re.compile(r"/compare/case/"))
    expect(page.locator("#first-divergence")).to_contain_text("turn 3")
    marked = page.locator("#turn-alignment tr.first-divergence")
    expect(marked).to_have_count(1)
    expect(marked).to_have_id("turn-3")
    expect(marked).to_contain_text("first difference")
    expect(marked).to_contain_text("THREE?!")
    shot(page, "conversation_compare")


def test_the_set_page_says_which_cases_are_conversations(wide_viewer: Page, conversation_runs: dict[str, str]) -> None:
    page = wide_viewer
    page.goto("/sets/")
    page.get_by_role("link", name=SET_NAME, exact=True).first.click()
    expect(page.locator("#cases tr", has_text="talk").first).to_contain_text("conversation · 3 turns")
    expect(page.locator("#cases tr", has_text="single")).not_to_contain_text("conversation")


def test_live_progress_shows_a_conversations_turns_as_they_finish(
    wide_viewer: Page, site: Site, agents: Path, tmp_path: Path
) -> None:
    """A CLI run of ``gated-talker``: each turn after the first waits for its gate file, so the
    page is watched with turn 1 done, then turn 2, then the run ending."""
    page = wide_viewer
    gates = tmp_path / "gates"
    gates.mkdir()
    env = cli_env(site, agents, CONV_GATES=str(gates))
    args = ["eval", str(agents), "--set", SET_NAME, "--target", "gated-talker", "--split", "dev", "--quiet",
            "--timeout", "600", "--concurrency", "1"]  # fmt: skip
    with (tmp_path / "cli.log").open("w") as log:
        cli = subprocess.Popen([*EVALSITE, *args], env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    try:
        run_id = ""
        while not run_id:  # the run row exists as soon as the CLI has started it
            assert cli.poll() is None, (tmp_path / "cli.log").read_text()
            run_id = run_id_of("gated-talker", env, site)
        page.goto(f"/runs/{run_id}/")
        # the cases run in the set's order, one at a time: "talk" first, its turn 2 gated
        talk = page.locator("#live-turns li[data-case='talk']")
        expect(talk).to_contain_text("talk: 1 of 3 turns done")
        expect(talk).to_contain_text("playing turn 2: two")
        (gates / "turn-2").touch()
        expect(talk).to_contain_text("talk: 2 of 3 turns done")
        (gates / "turn-3").touch()
        expect(page.locator("#run-head-status")).to_have_text("finished")
        expect(page.locator("#live-turns li")).to_have_count(0)
        assert cli.wait(timeout=120) in (0, 1), (tmp_path / "cli.log").read_text()
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
