"""Every page, every width, every reader (issue 26).

* axe-core (the script bundled by the ``axe-playwright-python`` package, axe-core 4.x, MPL-2.0)
  runs on every portal page as a member and as a viewer, on the login page, and on the admin's
  index and case list: zero serious or critical violations. The counts per page are printed
  (``-s`` shows them).
* At 1280, 1440 and 1920 px every page fits the window (no sideways scroll) and no id or figure
  (``.mono``, ``.num``, ``code`` without spaces) is broken across lines.
* Keyboard: no positive ``tabindex``, nothing hidden takes focus, and tabbing through the run
  page shows a visible outline on every element that receives focus.

One browser context per user or width; the pages are visited in sequence.


The file's name sorts it after the other browser tests: it makes their data when its session
(its xdist worker) has not made it yet (``once_per_site``), and data made before ``test_flow``
changed what that test's playground offers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Browser, Page

from tests.e2e import test_conversations, test_layout
from tests.e2e.conftest import SCREENSHOTS, Site, login, open_context, shot
from tests.e2e.test_layout import MEASURE
from tests.e2e.test_rules import rules_demo_runs

# The data of the conversation and layout tests (module fixtures, their data made once per site).
agents = test_conversations.agents
conversation_runs = test_conversations.conversation_runs
layout_runs = test_layout.layout_runs

WIDTHS = (1280, 1440, 1920)
BLOCKING = ("serious", "critical")

# An id or a figure (one word, no spaces) whose text sits on more than one line box.
BROKEN_WORDS = """() => {
  const out = [];
  for (const el of document.querySelectorAll(".mono, .num, code, time")) {
    if (!el.checkVisibility() || el.closest("pre")) continue;
    const text = el.innerText.trim();
    if (!text || /\\s/.test(text) || text.length > 64) continue;
    const rects = [];
    const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      if (!node.textContent.trim()) continue;
      const range = document.createRange();
      range.selectNodeContents(node);
      rects.push(...[...range.getClientRects()].filter((r) => r.width > 0 && r.height > 0));
    }
    if (!rects.length) continue;
    const top = Math.min(...rects.map((r) => r.top));
    const lineHeight = Math.min(...rects.map((r) => r.height));
    if (rects.some((r) => r.top >= top + lineHeight * 0.8)) {
      out.push(`${el.tagName.toLowerCase()}.${el.className.replaceAll(" ", ".")} ${JSON.stringify(text)}`);
    }
  }
  return out;
}"""

# When the page body overflows: the outermost elements that reach past its right edge.
OVERFLOWING = """() => {
  const main = document.querySelector("main");
  const right = main.getBoundingClientRect().right - parseFloat(getComputedStyle(main).paddingRight) + 1;
  const out = [];
  for (const el of main.querySelectorAll("*")) {
    if (el.getBoundingClientRect().right > right && !out.some((o) => o.contains(el))) out.push(el);
  }
  return out.slice(0, 3).map((el) => `${el.tagName.toLowerCase()}#${el.id}.${el.className}`
    + ` (${Math.round(el.getBoundingClientRect().width)} px)`);
}"""

# Focusable things that a keyboard user should not meet, or should not meet out of order.
TAB_TRAPS = """() => {
  const out = [];
  for (const el of document.querySelectorAll("[tabindex]")) {
    if (el.tabIndex > 0) out.push(`positive tabindex ${el.tabIndex}: ${el.outerHTML.slice(0, 80)}`);
  }
  const focusable = "a[href], button:not([disabled]), input:not([disabled]):not([type=hidden]), "
    + "select:not([disabled]), textarea:not([disabled]), summary, [tabindex]:not([tabindex='-1'])";
  for (const el of document.querySelectorAll(focusable)) {
    if (el.closest("[inert]")) continue;
    if (el.closest("details:not([open])") && el.tagName !== "SUMMARY") continue;
    const hidden = el.closest("[aria-hidden=true]");
    if (hidden) out.push(`focusable inside aria-hidden: ${el.outerHTML.slice(0, 80)}`);
  }
  return out;
}"""


def _href(page: Page, selector: str) -> str:
    href = page.locator(selector).first.get_attribute("href")
    assert href, f"no link {selector} on {page.url}"
    return href.replace("&amp;", "&")


def discover(page: Page, layout: tuple[str, str], conv: dict[str, str], rules: tuple[str, str]) -> dict[str, str]:
    """The portal's pages, by name, each found by following the portal's own links."""
    run_a, run_b = layout
    page.goto(f"/runs/{run_b}/")
    row = page.locator("#results-body tr[id^=result-]").first
    case = row.locator("a.row-link").first.get_attribute("href")
    trace = row.get_by_role("link", name="trace").get_attribute("href")
    set_path = _href(page, "#run-head a[href^='/sets/']")
    page.goto(f"/runs/{conv['talker-bad2']}/")
    conversation = _href(page, "#results-body a.row-link")
    page.goto(f"/compare/?a={run_a}&b={run_b}")
    compare_case = _href(page, "a[href^='/compare/case/']")
    assert case and trace
    set_id = set_path.strip("/").split("/")[1]
    return {
        "home": "/",
        "sets": "/sets/",
        "set": set_path,
        "splits": f"/sets/{set_id}/splits/",
        "trends": f"/trends/?set={set_id}",
        "runs": "/runs/",
        "run": f"/runs/{run_b}/",
        "case": case,
        "case (conversation)": conversation,
        "compare": f"/compare/?a={run_a}&b={run_b}",
        "compare case": compare_case,
        "review queue": f"/runs/{run_b}/review/",
        "trace": trace,
        "playground": "/playground/",
        "status": "/status/",
        "rules (run page's rule blocks)": f"/runs/{rules[1]}/",
    }


@pytest.fixture(scope="module")
def pages(
    browser: Browser, site: Site, layout_runs: tuple[str, str], conversation_runs: dict[str, str]
) -> dict[str, str]:
    """``{name: path}`` of every portal page (found as a member)."""
    context = open_context(browser, site)
    page = context.new_page()
    login(page, "member")
    try:
        return discover(page, layout_runs, conversation_runs, rules_demo_runs(site))
    finally:
        context.close()


def _visit(page: Page, path: str) -> None:
    response = page.goto(path)
    assert response is not None and response.status < 400, f"{path}: {response and response.status}"
    page.wait_for_load_state("networkidle")  # the blocks loaded after the page are in


@pytest.fixture
def user_page(browser: Browser, site: Site, request: pytest.FixtureRequest) -> Iterator[Page]:
    """A page logged in as ``request.param`` ("" for no session), 1440 px wide."""
    context = open_context(browser, site)
    context.set_default_timeout(60_000)
    page = context.new_page()
    page.set_viewport_size({"width": 1440, "height": 900})
    if request.param:
        login(page, request.param)
    yield page
    context.close()


def _axe(page: Page, axe: Axe) -> tuple[dict[str, int], list[str]]:
    """``({impact: count of violating nodes}, [serious/critical violations, described])``."""
    counts: dict[str, int] = {}
    blocking: list[str] = []
    for violation in axe.run(page).response["violations"]:
        impact = violation.get("impact") or "minor"
        counts[impact] = counts.get(impact, 0) + len(violation["nodes"])
        if impact in BLOCKING:
            targets = [
                " ".join(map(str, node["target"])) + ": " + (node.get("failureSummary") or "").splitlines()[-1].strip()
                for node in violation["nodes"][:3]
            ]
            blocking.append(
                f"{violation['id']} ({impact}, {len(violation['nodes'])} nodes): {violation['help']} {targets}"
            )
    return counts, blocking


def _report(user: str, name: str, counts: dict[str, int]) -> str:
    figures = ", ".join(f"{impact} {counts.get(impact, 0)}" for impact in ("critical", "serious", "moderate", "minor"))
    return f"axe {user:<9} {name:<20} {figures}"


@pytest.mark.parametrize("user_page", ["member", "viewer"], indirect=True)
def test_axe_finds_no_serious_or_critical_violation_on_any_portal_page(
    user_page: Page, pages: dict[str, str], request: pytest.FixtureRequest
) -> None:
    page, axe, problems = user_page, Axe(), []
    user = request.node.callspec.params["user_page"]
    for name, path in pages.items():
        if user == "viewer" and name in ("review queue", "playground"):
            continue  # a viewer may not review or chat (403); the member walk covers both
        _visit(page, path)
        counts, blocking = _axe(page, axe)
        print(_report(user, name, counts))
        problems += [f"{name} ({path}): {b}" for b in blocking]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("user_page", ["admin"], indirect=True)
def test_axe_finds_no_serious_or_critical_violation_on_login_and_admin(
    user_page: Page, browser: Browser, site: Site
) -> None:
    page, axe, problems = user_page, Axe(), []
    for name, path in {"admin index": "/admin/", "admin cases": "/admin/evals/evalcase/"}.items():
        _visit(page, path)
        counts, blocking = _axe(page, axe)
        print(_report("admin", name, counts))
        problems += [f"{name} ({path}): {b}" for b in blocking]
    anonymous = open_context(browser, site)
    try:
        login_page = anonymous.new_page()
        _visit(login_page, "/accounts/login/")
        counts, blocking = _axe(login_page, axe)
        print(_report("anonymous", "login", counts))
        problems += [f"login: {b}" for b in blocking]
    finally:
        anonymous.close()
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("width", WIDTHS)
def test_every_page_fits_and_keeps_ids_and_figures_whole(
    browser: Browser, site: Site, pages: dict[str, str], width: int
) -> None:
    context = open_context(browser, site)
    page = context.new_page()
    page.set_viewport_size({"width": width, "height": 900})
    problems: list[str] = []
    try:
        login(page, "member")
        for name, path in {**pages, "login": "/accounts/login/"}.items():
            if name == "login":
                context.clear_cookies()
            _visit(page, path)
            found: dict[str, Any] = (
                page.evaluate(MEASURE) if page.locator("main").count() else {"bad": [], "mainOverflow": 0}
            )
            width_now = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
            if width_now[0] > width_now[1]:
                problems.append(f"{name} ({path}): the page scrolls sideways ({width_now[0]} > {width_now[1]} px)")
            if found["mainOverflow"] > 0:
                wide = page.evaluate(OVERFLOWING)
                problems.append(
                    f"{name} ({path}): content is {found['mainOverflow']} px wider than the page body: {wide}"
                )
            problems += [f"{name} ({path}): {cell}" for cell in found["bad"][:5]]
            problems += [f"{name} ({path}): broken {word}" for word in page.evaluate(BROKEN_WORDS)[:5]]
            if problems and problems[-1].startswith(f"{name} ("):
                shot(page, f"every_page_{name.split()[0]}_{width}")
    finally:
        context.close()
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("user_page", ["member"], indirect=True)
def test_every_page_is_walkable_by_keyboard(user_page: Page, pages: dict[str, str]) -> None:
    page, problems = user_page, []
    for name, path in pages.items():
        _visit(page, path)
        problems += [f"{name} ({path}): {trap}" for trap in page.evaluate(TAB_TRAPS)[:5]]
    assert not problems, "\n".join(problems)


FOCUS_STYLE = """() => {
  const el = document.activeElement;
  if (!el || el === document.body) return null;
  const style = getComputedStyle(el);
  return {
    tag: el.tagName.toLowerCase(), text: (el.innerText || el.value || el.name || "").slice(0, 30),
    outline: style.outlineStyle !== "none" && parseFloat(style.outlineWidth) >= 2,
    shadow: style.boxShadow !== "none",
    focusVisible: el.matches(":focus-visible"),
  };
}"""


@pytest.mark.parametrize("user_page", ["member"], indirect=True)
def test_tabbing_through_the_run_page_shows_where_the_focus_is(user_page: Page, pages: dict[str, str]) -> None:
    page = user_page
    _visit(page, pages["run"])
    seen, invisible = 0, []
    for _ in range(40):
        page.keyboard.press("Tab")
        focused = page.evaluate(FOCUS_STYLE)
        if focused is None:
            continue
        seen += 1
        assert focused["focusVisible"], focused
        if not (focused["outline"] or focused["shadow"]):
            invisible.append(f"{focused['tag']} {focused['text']!r}")
    assert seen >= 20, f"only {seen} elements took focus in 40 tabs"
    assert not invisible, f"focus not visible on: {invisible}"


# The pages `make screenshots` copies to docs/screenshots/ (file stem: page name).
DOC_PAGES = {
    "sets": "sets", "set": "set", "splits": "splits", "trends": "trends", "runs": "runs",
    "run": "run", "case": "case", "case (conversation)": "case_conversation", "compare": "compare",
    "compare case": "compare_case", "review queue": "review_queue", "trace": "trace", "playground": "playground",
    "status": "status",
}  # fmt: skip


@pytest.mark.parametrize("user_page", ["member"], indirect=True)
def test_main_pages_at_1440_px_for_the_docs(user_page: Page, pages: dict[str, str]) -> None:
    """A 1440 x 1000 px screenshot of each main page as a member sees it, as
    ``screenshots/page_<name>.png`` (``scripts/screenshots.py`` copies them to ``docs/screenshots/``)."""
    page = user_page
    page.set_viewport_size({"width": 1440, "height": 1000})
    for name, stem in DOC_PAGES.items():
        _visit(page, pages[name])
        page.evaluate("document.fonts.ready")
        path = SCREENSHOTS / f"page_{stem}.png"
        SCREENSHOTS.mkdir(exist_ok=True)
        page.screenshot(path=str(path), animations="disabled", caret="hide")
        assert path.stat().st_size > 10_000, f"{path} looks empty"
