"""The judge ledger in a browser: the run page loads its ledger block; the run page with it and
the flakiness page have no serious or critical axe-core violation (the every-page walk covers the
compare page, whose judges block is empty for runs nothing judged)."""

from __future__ import annotations

from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Page, expect

from tests.e2e.conftest import Site

BLOCKING = ("serious", "critical")


def _blocking(page: Page, axe: Axe) -> list[str]:
    return [
        f"{v['id']} ({v['impact']}): {v['help']}"
        for v in axe.run(page).response["violations"]
        if (v.get("impact") or "minor") in BLOCKING
    ]


def test_ledger_and_flakiness_pages_in_a_browser(viewer_page: Page, site: Site) -> None:
    page, axe, problems = viewer_page, Axe(), []
    page.goto(f"/runs/{site.run_v2}/")
    table = page.locator("#ledger #ledger-table")
    expect(table).to_be_visible()  # the lazy block arrived: one row per scorer, coverage n=k/N
    expect(table.locator("tbody tr").first).to_contain_text("n=")
    expect(page.locator("#judge-cost")).to_contain_text("judge cost")
    problems += [f"run page: {p}" for p in _blocking(page, axe)]  # the ledger page is this block whole
    page.get_by_role("link", name="flakiness report").click()
    expect(page.locator("h1")).to_contain_text("Flaky verdicts")
    problems += [f"flakiness page: {p}" for p in _blocking(page, axe)]
    assert not problems, "\n".join(problems)
