"""Where did B change, in a real browser (issue 13 §3): the compare page loads its slices block
after itself, by tag and split, with the Holm-corrected reading; screenshot for the docs."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.e2e.conftest import Site, shot


def test_compare_page_shows_the_comparison_by_slice(viewer_page: Page, site: Site) -> None:
    page = viewer_page
    page.goto(f"/compare/?a={site.run_v1}&b={site.run_v2}")
    table = page.locator("#slices-table")  # arrives after the page
    expect(table).to_be_visible()
    expect(table.locator("tr[data-slice='tag=even']")).to_have_count(1)
    expect(table.locator("tr[data-slice='tag=odd']")).to_have_count(1)
    expect(page.locator("#slice-findings")).to_be_visible()
    expect(page.locator("#scorer-deltas-table")).to_be_visible()
    shot(page, "slice_table")
