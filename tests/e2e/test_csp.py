"""The Content-Security-Policy holds in a real browser: the pages (live websocket, htmx swaps,
charts, the API docs) work without one policy violation."""

from __future__ import annotations

from playwright.sync_api import Page

from tests.e2e.conftest import Site


def test_pages_run_without_a_policy_violation(member_page: Page, site: Site) -> None:
    page = member_page
    violations: list[str] = []
    page.on("console", lambda m: violations.append(m.text) if "Content Security Policy" in m.text else None)
    page.add_init_script(
        "document.addEventListener('securitypolicyviolation',"
        " e => console.error('Content Security Policy violation: ' + e.violatedDirective + ' ' + e.blockedURI))"
    )
    paths = [
        "/",
        "/runs/",
        f"/runs/{site.run_v1}/",
        f"/compare/?a={site.run_v1}&b={site.run_v2}",
        "/sets/",
        "/trends/",
        "/traces/",
        "/playground/",
        "/api/docs",
    ]
    for path in paths:
        page.goto(path)
        page.wait_for_load_state("networkidle")
    case = page.goto(f"/runs/{site.run_v1}/")
    assert case is not None and case.ok
    page.locator("a[href*='/cases/']").first.click()
    page.wait_for_load_state("networkidle")
    page.locator("a[href^='/traces/']").first.click()
    page.wait_for_load_state("networkidle")
    assert violations == []
