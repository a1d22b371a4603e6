"""One keystroke per verdict in a real browser (issue 26): in the ``unreviewed`` queue a member
reviews three cases with three keys, each saved (stored, confirmed on screen and in the aria-live
region) and followed by the next case in place; "case N of M" holds at each step although each
reviewed case leaves the filter; ``k`` and the visible "previous" link (by keyboard) go back to
the cases just reviewed, exactly, also after a reload."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from tests.e2e.conftest import Site, shot


def test_three_verdicts_take_three_keystrokes_and_k_goes_back(member_page: Page, site: Site) -> None:
    page = member_page
    page.goto(f"/runs/{site.run_v2}/review/?filter=unreviewed")
    panel = page.locator("#review-panel")
    position = page.locator("#queue-position")
    expect(panel).to_have_attribute("data-result", re.compile(r"^\d+$"))
    expect(page.locator("#review-keys")).to_be_visible()  # the keys, listed on the page
    expect(page.locator("#review-keys")).to_contain_text("then the next case")
    start = re.fullmatch(r"case 1 of (\d+) · 0 reviewed by you", position.inner_text().strip())
    assert start, position.inner_text()
    size = int(start[1])
    assert size > 4

    page.evaluate("window.loadedOnce = 'still this page'")  # gone if anything reloads the page
    reviewed: list[tuple[str, str, str]] = []
    for n, (key, verdict) in enumerate((("p", "pass"), ("f", "fail"), ("u", "unsure"))):
        result_id = panel.get_attribute("data-result") or ""
        case_id = panel.locator("h2 a.mono").inner_text()
        page.keyboard.press(key)  # the one keystroke: saved, then the next case
        expect(panel).not_to_have_attribute("data-result", result_id)
        expect(page.locator("#review-saved")).to_contain_text(f"Saved your review of {case_id} ({verdict})")
        expect(page.locator("#review-live")).to_contain_text(f"Saved your review of {case_id} ({verdict})")
        expect(position).to_have_text(f"case {n + 2} of {size} · {n + 1} reviewed by you")
        reviewed.append((result_id, case_id, verdict))
    assert page.evaluate("window.loadedOnce") == "still this page"  # each case swapped in place
    shot(page, "review_keys")

    # k: back to the case just reviewed, which "unreviewed" no longer holds
    last_id = reviewed[-1][0]
    page.keyboard.press("k")
    expect(panel).to_have_attribute("data-result", last_id)
    expect(position).to_have_text(f"case 3 of {size} · 3 reviewed by you")
    expect(page.locator("#my-review")).to_contain_text("Your review: unsure")
    expect(page).to_have_url(re.compile(rf"[?&]walk=[\w-]+.*[?&]result={last_id}$"))
    page.reload()  # the walk is in the URL and the session: the same place after a reload
    expect(panel).to_have_attribute("data-result", last_id)
    expect(position).to_have_text(f"case 3 of {size} · 3 reviewed by you")
    page.keyboard.press("k")
    expect(panel).to_have_attribute("data-result", reviewed[1][0])
    previous = page.locator("#review-previous")  # the visible link, by keyboard
    previous.focus()
    expect(previous).to_be_focused()
    page.keyboard.press("Enter")
    expect(panel).to_have_attribute("data-result", reviewed[0][0])
    expect(position).to_have_text(f"case 1 of {size} · 3 reviewed by you")

    for result_id, _, verdict in reviewed:  # stored, as the case page shows
        page.goto(f"/runs/{site.run_v2}/cases/{result_id}/")
        row = page.locator("table.reviews tr", has_text="member")
        expect(row).to_contain_text(verdict)
