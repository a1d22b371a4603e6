"""Reading a run in a real browser (issue 13 §2): the keyboard walks the run page's rows (j/k,
Enter opens the case) and the cases (n/p), and a JSON answer's case page shows its structural
diff (screenshot ``screenshots/structural_diff.png``)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import Site, clean_env, evalsite, shot
from tests.support.databases import subprocess_db_env

SET_NAME = "e2e_json_answers"
AGENT = '''
from evalcore.discovery import target


@target(id="city_json", scorers=["exact_match"])
def city_json(x):
    """Answers with a JSON object: the right city for even cases, Rome otherwise, one extra source."""
    city = x["city"] if x["n"] % 2 == 0 else "Rome"
    return {"answer": {"city": city, "country": x["country"]}, "sources": ["wiki/" + x["city"], "wiki/extra"]}
'''


@pytest.fixture(scope="module")
def json_case_url(site: Site, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A run of ``city_json`` on a set of JSON expected values (made with the CLI, on the site's
    database); the address of its first failing case."""
    root = tmp_path_factory.mktemp("json_answers")
    agents = root / "agents"
    agents.mkdir()
    (agents / "json_agents.py").write_text(AGENT, encoding="utf-8")
    bank = root / f"{SET_NAME}.jsonl"
    cities = [("Paris", "France"), ("Lyon", "France"), ("Oslo", "Norway"), ("Bergen", "Norway")]
    with bank.open("w", encoding="utf-8") as handle:
        for n, (city, country) in enumerate(cities):
            expected = {"answer": {"city": city, "country": country}, "sources": [f"wiki/{city}"]}
            case = {"id": f"city-{n}", "input": {"n": n, "city": city, "country": country}, "expected": expected}
            handle.write(json.dumps({**case, "split": "dev"}) + "\n")
    env = clean_env(
        **subprocess_db_env(site.db),
        EVALSITE_DATA_DIR=str(site.db.parent / "var"),
        EVALSITE_AGENTS_DIR=str(agents),
        DJANGO_SETTINGS_MODULE="evalsite.settings",
    )
    log = root / "cli.log"
    evalsite("import", str(bank), env=env, log=log)
    evalsite("eval", str(agents), "--set", SET_NAME, "--target", "city_json", "--quiet", env=env, log=log)
    code = (
        "from apps.evals.models import EvalResult; "
        "r = EvalResult.objects.get(eval_run__target_id='city_json', case_id='city-1'); "
        "print('case-url', f'/runs/{r.eval_run_id}/cases/{r.pk}/')"
    )
    return evalsite("shell", "--no-imports", "-c", code, env=env, log=log).split("case-url", 1)[-1].strip()


def _case_id(page: Page) -> str:
    return page.locator("h1 .mono").inner_text()


def test_run_rows_and_cases_by_keyboard(viewer_page: Page, site: Site) -> None:
    page = viewer_page
    page.goto(f"/runs/{site.run_v1}/")
    rows = page.locator("#results-body > tr")
    expect(rows.first).to_be_visible()
    page.keyboard.press("?")
    expect(page.locator("#keys-help")).to_be_visible()
    page.keyboard.press("?")
    expect(page.locator("#keys-help")).to_be_hidden()

    page.keyboard.press("j")
    expect(rows.nth(0)).to_have_class(re.compile(r"\bkey-current\b"))
    page.keyboard.press("j")
    page.keyboard.press("j")
    page.keyboard.press("k")
    current = page.locator("#results-body > tr.key-current")
    expect(current).to_have_count(1)
    expect(rows.nth(1)).to_have_class(re.compile(r"\bkey-current\b"))
    second = rows.nth(1).locator("a.row-link").inner_text()

    page.keyboard.press("/")
    expect(page.locator("input[name=text]")).to_be_focused()
    page.keyboard.press("Escape")

    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r"/cases/\d+/"))
    expect(page.locator("h1 .mono")).to_have_text(second)

    page.keyboard.press("n")
    expect(page.locator("h1 .mono")).not_to_have_text(second)
    following = _case_id(page)
    assert following != second
    page.keyboard.press("p")
    expect(page.locator("h1 .mono")).to_have_text(second)
    page.keyboard.press("n")
    expect(page.locator("h1 .mono")).to_have_text(following)


def test_compare_case_pages_step_by_keyboard(viewer_page: Page, site: Site) -> None:
    page = viewer_page
    page.goto(f"/compare/?a={site.run_v1}&b={site.run_v2}")
    expect(page.locator("tbody.key-rows > tr").first).to_be_visible()
    page.keyboard.press("j")
    first = page.locator("tbody.key-rows > tr.key-current a.row-link").inner_text()
    page.keyboard.press("Enter")
    expect(page.locator("h1 .mono")).to_have_text(first)
    page.keyboard.press("n")
    expect(page.locator("h1 .mono")).not_to_have_text(first)
    page.keyboard.press("p")
    expect(page.locator("h1 .mono")).to_have_text(first)


def test_json_answers_show_a_structural_diff(viewer_page: Page, json_case_url: str) -> None:
    page = viewer_page
    page.goto(json_case_url)
    block = page.locator(".diff-block[data-diff-mode=json]")
    expect(block).to_be_visible()
    expect(block.locator("tr[data-path='$.answer.city']")).to_contain_text("Lyon")
    expect(block.locator("tr[data-path='$.answer.city']")).to_contain_text("Rome")
    expect(block.locator("tr[data-path='$.sources[1]']")).to_contain_text("+ added")
    path = shot(page, "structural_diff")
    assert Path(path).stat().st_size > 10_000
