"""The admin in a real browser (issue 26): the portal's look (its palette on the header, its font),
a way back to the portal, tags shown as comma-separated text, the select-all box still driving the
row checkboxes, and no Content-Security-Policy violation on the way."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.e2e.conftest import Site, login, open_context, shot


@pytest.fixture
def admin_page(browser: Browser, site: Site) -> Iterator[Page]:
    """A page logged in as the demo admin (staff, superuser)."""
    context = open_context(browser, site)
    page = context.new_page()
    login(page, "admin")
    yield page
    context.close()


def test_admin_has_the_portal_look_and_no_policy_violation(admin_page: Page) -> None:
    page = admin_page
    violations: list[str] = []
    page.on("console", lambda m: violations.append(m.text) if "Content Security Policy" in m.text else None)
    page.add_init_script(
        "document.addEventListener('securitypolicyviolation',"
        " e => console.error('Content Security Policy violation: ' + e.violatedDirective + ' ' + e.blockedURI))"
    )
    page.goto("/admin/")
    page.wait_for_load_state("networkidle")
    expect(page.locator("#site-name")).to_contain_text("Evalsite")
    # the portal's dark top bar and system font, from evalsite/admin.css
    header_bg = page.eval_on_selector("#header", "e => getComputedStyle(e).backgroundColor")
    assert header_bg == "rgb(17, 24, 39)"
    font = page.eval_on_selector("body", "e => getComputedStyle(e).fontFamily")
    assert font.startswith("system-ui")
    expect(page.locator("#header a.portal-link")).to_have_attribute("href", "/")

    page.goto("/admin/evals/evalcase/")
    page.wait_for_load_state("networkidle")
    rows = page.locator("input.action-select")
    expect(rows.first).to_be_visible()
    page.locator("#action-toggle").check()
    expect(page.locator("input.action-select:not(:checked)")).to_have_count(0)
    expect(page.locator(".action-counter")).to_contain_text(f"{rows.count()} of")
    shot(page, "admin-case-list")

    page.locator("#result_list tbody th a").first.click()
    page.wait_for_load_state("networkidle")
    tags = page.locator("input[name=tags]")
    expect(tags).to_be_visible()
    assert not tags.input_value().startswith("[")  # comma-separated text, not a JSON list
    shot(page, "admin-case-change")
    page.locator("#header a.portal-link").click()
    page.wait_for_url(lambda url: "/admin/" not in url)
    assert violations == []
