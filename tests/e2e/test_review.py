"""The review queue in a real browser (issue 13 §1): a member grades five cases with the keyboard
only, one keystroke each (issue 26), each review confirmed saved on screen as the queue moves on;
after a reload all five are kept, and the run page shows the verdict's agreement with people."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from tests.e2e.conftest import Site, shot


def test_a_reviewer_walks_the_queue_by_keyboard(member_page: Page, site: Site) -> None:
    page = member_page
    page.goto(f"/runs/{site.run_v1}/review/")
    panel = page.locator("#review-panel")
    expect(panel).to_have_attribute("data-result", re.compile(r"^\d+$"))
    total = int(page.locator(".review-progress").get_attribute("aria-valuemax") or 0)
    before = int(page.locator(".review-progress").get_attribute("aria-valuenow") or 0)  # other tests' reviews
    assert total > before + 5

    page.keyboard.press("?")
    expect(page.locator("#review-help")).to_be_visible()
    page.keyboard.press("?")
    expect(page.locator("#review-help")).to_be_hidden()

    reviewed: list[str] = []
    first_result = panel.get_attribute("data-result")
    for n, verdict_key in enumerate("pfpuf"):
        result_id = panel.get_attribute("data-result")
        case_id = panel.locator("h2 a.mono").inner_text()
        if n == 0:  # the first one also gets an axis score and a comment, by keyboard
            page.keyboard.press("4")  # the highlighted axis: accuracy
            page.keyboard.press("c")
            page.keyboard.type("checked by hand")
            page.keyboard.press("Escape")
        page.keyboard.press(verdict_key)
        expect(page.locator("#review-saved")).to_contain_text(f"Saved your review of {case_id}")
        expect(page.locator("#review-count")).to_have_text(f"{before + n + 1} / {total} reviewed")
        reviewed.append(case_id)
        # issue 26: the verdict key saved and moved on, one keystroke (no separate j)
        expect(panel).not_to_have_attribute("data-result", result_id or "")
    shot(page, "review_queue")

    page.reload()
    expect(page.locator("#review-count")).to_have_text(f"{before + 5} / {total} reviewed")
    page.goto(f"/runs/{site.run_v1}/review/?filter=reviewed")
    expect(page.locator(".review-progress")).to_contain_text(f"{before + 5} cases in this queue")
    page.goto(f"/runs/{site.run_v1}/cases/{first_result}/")
    expect(page.locator("table.reviews")).to_contain_text("checked by hand")
    expect(page.locator("table.reviews")).to_contain_text("accuracy 4")

    page.goto(f"/runs/{site.run_v1}/")
    table = page.locator("#agreement-table")  # loads after the page
    expect(table).to_contain_text("case verdict")
    expect(page.locator("#review-agreement-block")).to_contain_text(f"{before + 5} of {total} cases reviewed")
    shot(page, "review_agreement")
