"""The trace viewer in a real browser (issue 26): ↑/↓ move through the span tree, ←/→ fold and
unfold, Enter shows a span (its detail fetched, the URL's hash set), a ``#span-…`` link selects its
span on open, a click on the arrow folds. Screenshot: ``screenshots/trace_viewer.png`` at 1440 px.

Run on its own: ``.venv/bin/python -m pytest -q -p no:cacheprovider -o addopts="" tests/e2e/test_trace_viewer.py``
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Locator, Page, expect

from tests.e2e.conftest import SCREENSHOTS, Site, clean_env, evalsite, login
from tests.support.databases import subprocess_db_env


@pytest.fixture(scope="module")
def trace_pk(site: Site) -> int:
    """A stored 130-span agent trace (tests/support/big_trace.py) in the site's database."""
    env = clean_env(**subprocess_db_env(site.db), DJANGO_SETTINGS_MODULE="evalsite.settings")
    code = (
        "from tests.support.big_trace import add_big_trace, make_trace_run; "
        "r = make_trace_run('e2e-viewer'); add_big_trace(r, 130); print('trace-pk', r.pk)"
    )
    out = evalsite("shell", "--no-imports", "-c", code, env=env, log=site.log)
    return int(out.split("trace-pk", 1)[1].strip())


@pytest.fixture
def wide_page(browser: Browser, site: Site) -> Iterator[Page]:
    """A member's page at 1440 × 900, with every CSP violation collected in ``page.violations``."""
    context = browser.new_context(base_url=site.url, viewport={"width": 1440, "height": 900})
    context.set_default_timeout(60_000)
    page = context.new_page()
    violations: list[str] = []
    page.on("console", lambda m: violations.append(m.text) if "Content Security Policy" in m.text else None)
    page.violations = violations  # type: ignore[attr-defined]
    login(page, "member")
    yield page
    context.close()


def row(page: Page, span_id: str) -> Locator:
    return page.locator(f"table.tv-tree tr[data-span='{span_id}']")


def test_keyboard_moves_folds_and_selects(wide_page: Page, trace_pk: int) -> None:
    page = wide_page
    page.goto(f"/traces/{trace_pk}/")
    root = row(page, "root")
    expect(root).to_have_attribute("aria-selected", "true")
    expect(page.locator("table.tv-tree")).to_have_attribute("data-ready", "true")
    root.focus()
    expect(root).to_be_focused()
    page.keyboard.press("ArrowDown")
    expect(row(page, "chat-0")).to_be_focused()
    page.keyboard.press("ArrowDown")
    expect(row(page, "tool-0")).to_be_focused()
    page.keyboard.press("ArrowUp")
    expect(row(page, "chat-0")).to_be_focused()
    # Enter shows the span: its detail comes from the server, the URL names it
    page.keyboard.press("Enter")
    expect(page.locator("#span-detail-title")).to_have_attribute("data-span", "chat-0")
    expect(row(page, "chat-0")).to_have_attribute("aria-selected", "true")
    expect(root).to_have_attribute("aria-selected", "false")
    assert page.url.endswith("?span=chat-0#span-chat-0")
    expect(page.locator("#span-said")).to_contain_text("get_order")
    # a tool call with a nested sub-agent: → goes in, ← folds it, ↓ then skips its subtree
    tool = row(page, "tool-9")
    tool.focus()
    page.keyboard.press("ArrowRight")
    expect(row(page, "sub-9")).to_be_focused()
    page.keyboard.press("ArrowLeft")  # a folded-open sub-agent: fold it
    expect(row(page, "sub-9")).to_have_attribute("aria-expanded", "false")
    expect(row(page, "sub-chat-9")).to_be_hidden()
    page.keyboard.press("ArrowLeft")  # folded: go to the parent
    expect(tool).to_be_focused()
    page.keyboard.press("ArrowLeft")
    expect(tool).to_have_attribute("aria-expanded", "false")
    expect(row(page, "sub-9")).to_be_hidden()
    page.keyboard.press("ArrowDown")
    expect(row(page, "chat-10")).to_be_focused()
    page.keyboard.press("ArrowUp")
    page.keyboard.press("ArrowRight")  # unfold: the sub-agent comes back, still folded itself
    expect(row(page, "sub-9")).to_be_visible()
    expect(row(page, "sub-chat-9")).to_be_hidden()
    # only one row is in the Tab order
    assert page.locator("table.tv-tree tr[tabindex='0']").count() == 1
    assert page.violations == []  # type: ignore[attr-defined]


def test_a_hash_deep_link_selects_its_span_and_the_arrow_folds(wide_page: Page, trace_pk: int) -> None:
    page = wide_page
    page.goto(f"/traces/{trace_pk}/#span-tool-49")
    expect(page.locator("#span-detail-title")).to_have_attribute("data-span", "tool-49")
    failing = row(page, "tool-49")
    expect(failing).to_have_attribute("aria-selected", "true")
    expect(failing).to_be_focused()
    expect(page.locator("#span-detail")).to_contain_text("Arguments")
    # a click on the root's arrow folds everything under it, a second one unfolds
    page.locator("table.tv-tree tr[data-span='root'] .tv-toggle").click()
    expect(row(page, "root")).to_have_attribute("aria-expanded", "false")
    expect(failing).to_be_hidden()
    page.locator("table.tv-tree tr[data-span='root'] .tv-toggle").click()
    expect(failing).to_be_visible()
    # a click on a row selects it
    row(page, "chat-3").locator("a").click()
    expect(page.locator("#span-detail-title")).to_have_attribute("data-span", "chat-3")
    assert page.url.endswith("#span-chat-3")
    # the deep link of a failing tool call, opened fresh: its error text and its tool's answer
    page.goto(f"/traces/{trace_pk}/?span=tool-49#span-tool-49")
    expect(page.locator("#span-detail-title")).to_have_attribute("data-span", "tool-49")
    expect(page.locator("#span-error")).to_have_text("TimeoutError: orders service timed out")
    # the docs' screenshot: the top of the page with a chat span's conversation selected
    page.goto(f"/traces/{trace_pk}/?span=chat-1")
    expect(page.locator("#span-sent")).to_contain_text("Where is order 42?")
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "trace_viewer.png"))
    assert page.violations == []  # type: ignore[attr-defined]
