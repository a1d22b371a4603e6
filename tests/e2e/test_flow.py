"""The whole portal flow in a real browser, as a user walks it.

Member: start a run from the form, watch it progress live over the websocket, open a failing
case (expected vs actual diff, scores, span tree), compare the two CLI runs of two variants and
read the significance, chat in the playground and capture the conversation as a case, then find
it in the set. Viewer: reads, but cannot start runs. Anonymous: sent to the login page.
"""

from __future__ import annotations

import json
import re
import time

from playwright.sync_api import Page, expect

from tests.e2e.conftest import BIG_CASES, BIG_SET_NAME, DEV_CASES, SET_NAME, Site, shot

LIVE_ROWS = 20  # apps.evals.views.live.LIVE_ROWS: the live run page's "latest cases" block

# The adder variants (see e2e_agents.py): v1 fails a % 4 == 0, v2 fails a % 15 == 1 on the 60 dev cases.
V1_PASSED, V2_PASSED = 45, 56
FIXED, BROKEN = 14, 3  # fail -> pass and pass -> fail from v1 (A) to v2 (B)
MCNEMAR_P = "0.0127"  # two-sided exact binomial test, 3 of 17 discordant pairs: 2 * 834 / 2**17


def stat(page: Page, label: str) -> str:
    """The value of a ``.stat`` block by its caption (``cases done``, ``pass → fail``...)."""
    return (
        page.locator(".stat", has=page.locator("span", has_text=re.compile(f"^{re.escape(label)}")))
        .locator("b")
        .first.inner_text()
    )


def leading_int(text: str) -> int:
    match = re.match(r"\s*(\d+)", text)
    assert match, f"no number in {text!r}"
    return int(match[1])


def set_id(page: Page) -> str:
    """The id of the e2e set, from the sets page."""
    page.goto("/sets/")
    href = page.get_by_role("link", name=SET_NAME, exact=True).first.get_attribute("href")
    assert href, "no link to the set"
    return re.search(r"/sets/(\d+)/", href)[1]  # type: ignore[index]


# -- access ------------------------------------------------------------------------------------


def test_anonymous_is_sent_to_login(anonymous_page: Page) -> None:
    page = anonymous_page
    for path in ("/runs/", "/runs/new/", "/compare/", "/sets/", "/playground/"):
        page.goto(path)
        assert "/accounts/login/" in page.url and "next=" in page.url, f"{path} -> {page.url}"
    expect(page.get_by_role("button", name="Log in")).to_be_visible()
    shot(page, "login")


def test_viewer_reads_but_cannot_start_a_run(viewer_page: Page, site: Site) -> None:
    page = viewer_page
    page.goto("/runs/")
    expect(page.get_by_role("heading", name="Runs")).to_be_visible()
    expect(page.get_by_role("link", name=site.run_v1)).to_be_visible()
    shot(page, "runs_viewer")
    start_links = page.get_by_role("link", name=re.compile("start (a )?run", re.I)).count()
    start_buttons = page.get_by_role("button", name=re.compile("start", re.I)).count()
    # Asking anyway: the form is forbidden, and so is a well-formed post (valid CSRF token, so the
    # 403 is the role check, not CSRF).
    assert page.goto("/runs/new/").status == 403  # type: ignore[union-attr]
    token = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    response = page.request.post(
        "/runs/new/",
        form={"eval_set": "1", "target": "slow-adder", "variant": "x", "split": "dev"},
        headers={"X-CSRFToken": token, "Referer": f"{site.url}/runs/new/"},
        max_redirects=0,
    )
    assert response.status == 403, response.status
    assert "CSRF verification failed" not in response.text() and "member role" in response.text()
    # The viewer's run list is unchanged: nothing was queued.
    page.goto("/runs/?variant=x")
    expect(page.get_by_text("No runs match.")).to_be_visible()
    # No way to start a run is offered to a viewer (checked last so the checks above always run).
    assert (start_links, start_buttons) == (0, 0), "the runs page offers a viewer a start-run link or button"


# -- member: start a run and watch it live ---------------------------------------------------


def test_member_starts_a_run_watches_it_live_and_opens_a_failing_case(member_page: Page, site: Site) -> None:
    page = member_page
    page.goto("/runs/")
    shot(page, "runs")
    page.get_by_role("link", name=re.compile("^start (a )?run$", re.I)).first.click()
    expect(page.get_by_role("heading", name=re.compile("start a run", re.I))).to_be_visible()
    page.select_option("select[name=eval_set]", label=SET_NAME)
    page.select_option("select[name=target]", "slow-adder")
    page.fill("input[name=variant]", "live")
    page.select_option("select[name=split]", "dev")
    shot(page, "start_run")
    page.get_by_role("button", name=re.compile("^start", re.I)).click()

    # Redirected to the run's live page.
    page.wait_for_url(re.compile(r"/runs/[0-9a-f]+/$"))
    run_url = page.url
    # A marker that a reload would wipe: every update below must arrive without one.
    page.evaluate("window.__e2e_no_reload = true")
    seen: list[int] = []
    live_rows_seen: list[int] = []
    head_seen: set[str] = set()
    footer_seen: set[str] = set()
    deadline = time.monotonic() + 180  # generous: only bounds a run that never finishes
    while True:
        done = leading_int(stat(page, "cases done"))
        if not seen or seen[-1] != done:
            seen.append(done)
        if 0 < done < DEV_CASES:
            # while running: a bounded block of the latest rows, the header and footer follow
            live_rows_seen.append(page.locator("#live-rows tr[id^=live-result-]").count())
            head_seen.add(page.locator("#run-head-status").inner_text())
            footer_seen.add(page.locator("#results-footer").inner_text())
        if 0 < done < DEV_CASES and len(seen) == 2:
            shot(page, "run_live")
        if done == DEV_CASES and "finished" in stat(page, "status"):
            break
        assert time.monotonic() < deadline, f"the run did not finish; done counts seen: {seen}"
        time.sleep(0.1)
    assert page.evaluate("window.__e2e_no_reload") is True, "the page was reloaded"
    assert page.url == run_url
    intermediate = [n for n in seen if 0 < n < DEV_CASES]
    assert len(intermediate) >= 2, f"too few live updates seen: {seen}"
    assert seen == sorted(seen), f"the done count went backwards: {seen}"
    # slow-adder fails a % 10 == 3: 6 of the 60 dev cases.
    assert leading_int(stat(page, "passed")) == DEV_CASES - 6
    assert leading_int(stat(page, "failed")) == 6
    # Once finished, the header and the per-split table follow without a reload.
    expect(page.locator("#run-head h1 .pill")).to_have_text("finished")
    expect(page.locator("#run-splits")).to_contain_text("Per split")
    expect(page.locator("#results-body tr.placeholder")).to_be_hidden()
    # The full table is refreshed at the end (first page: 50 rows), the live block emptied.
    expect(page.locator("#results-body tr[id^=result-]")).to_have_count(50)
    expect(page.locator("#live-rows")).to_have_count(0)
    expect(page.locator("#results-footer")).to_have_text(re.compile(rf"^{DEV_CASES} cases"))
    # The finished run's blocks arrive too, and no template comment leaks into the page.
    expect(page.get_by_role("heading", name="Distributions")).to_be_visible()
    expect(page.locator("#distributions-block #run-distributions")).to_have_count(1)
    expect(page.locator("#review-agreement")).not_to_contain_text("loads next")
    assert "{#" not in page.locator("body").inner_text(), "a template comment reached the page"
    shot(page, "run_finished")

    # Only the failing cases, then the first one.
    page.select_option("select[name=status]", "failed")
    rows = page.locator("#results-body tr[id^=result-]")
    expect(rows).to_have_count(6)
    expect(rows.locator(".pill", has_text="passed")).to_have_count(0)
    link = rows.first.locator("a").first
    case_id = link.inner_text().strip()
    a = int(case_id.removeprefix("case-"))
    b = (a * 7) % 11 + 1
    assert a % 10 == 3, case_id
    link.click()
    page.wait_for_url(re.compile(r"/runs/[0-9a-f]+/cases/\d+/\?status=failed$"))  # the filter travels along
    expect(page.get_by_role("heading", name=re.compile(f"Case {case_id}"))).to_be_visible()

    # Expected vs actual side by side, the difference marked.
    expect(page.get_by_role("heading", name="Expected vs actual")).to_be_visible()
    expected_pre = page.locator(".diff > div", has=page.get_by_role("heading", name="expected")).locator("pre")
    actual_pre = page.locator(".diff > div", has=page.get_by_role("heading", name="actual")).locator("pre")
    expect(expected_pre).to_have_text(str(a + b))
    expect(actual_pre).to_have_text(str(a + b + 1))
    expect(expected_pre.locator("del")).not_to_have_count(0)
    expect(actual_pre.locator("ins")).not_to_have_count(0)
    # Every score with its explanation.
    scores = page.locator("table", has=page.get_by_role("columnheader", name="explanation"))
    expect(scores.get_by_role("row", name=re.compile("exact_match"))).to_be_visible()

    # The trace as a span tree: the agent span with the tool span under it, arguments and result.
    tree = page.locator("table.tree")
    expect(tree.locator("tr", has_text="invoke_agent")).to_have_count(1)
    tool_row = tree.locator("tr", has=page.locator("td.name", has_text=re.compile(r"\sadd$")))
    expect(tool_row).to_have_count(1)
    expect(tool_row).to_contain_text("execute_tool")
    tool_row.locator("summary").click()
    expect(tool_row.locator("pre")).to_contain_text(f'"a": {a}')
    expect(tool_row.locator("pre")).to_contain_text(f'"result": {a + b + 1}')
    shot(page, "case_failing")

    # The run's trace page.
    page.get_by_role("link", name="trace page").click()
    page.wait_for_url(re.compile(r"/traces/\d+/$"))
    expect(page.get_by_role("treegrid")).to_contain_text("execute_tool")
    shot(page, "trace")

    assert live_rows_seen and max(live_rows_seen) > 0, "no live case row shown while the run ran"
    assert max(live_rows_seen) <= LIVE_ROWS, f"the live block is not bounded: {max(live_rows_seen)} rows"
    assert "running" in head_seen, f"the header status did not follow the run: {head_seen}"
    assert any(re.match(rf"\d+ of {DEV_CASES} cases done so far", f) for f in footer_seen), footer_seen


# -- compare two variants ----------------------------------------------------------------------


def test_compare_two_variants_shows_flips_and_significance(member_page: Page, site: Site) -> None:
    page = member_page
    sid = set_id(page)
    page.goto("/compare/")
    shot(page, "compare_empty")
    with page.expect_navigation():
        page.select_option("select[name=set]", sid)  # narrows the pickers (submits the form)
    option_a = page.locator("select[name=a] option", has_text="adder/v1")
    option_b = page.locator("select[name=b] option", has_text="adder/v2")
    expect(option_a).to_have_count(1)
    assert option_a.get_attribute("value") == site.run_v1
    assert option_b.get_attribute("value") == site.run_v2
    page.select_option("select[name=a]", site.run_v1)
    page.select_option("select[name=b]", site.run_v2)
    page.get_by_role("button", name="Compare").click()
    page.wait_for_url(re.compile(r"/compare/\?.*a="))

    verdict = page.locator("#verdict")
    expect(verdict).to_contain_text("B is better than A")
    expect(verdict).to_contain_text(f"p={MCNEMAR_P}")
    expect(verdict).to_contain_text("excludes 0")
    assert leading_int(stat(page, "cases in both")) == DEV_CASES
    assert stat(page, "pass rate A → B") == "75.0% → 93.3%"
    assert leading_int(stat(page, "pass → fail")) == BROKEN
    assert leading_int(stat(page, "fail → pass")) == FIXED
    assert stat(page, "McNemar exact p") == MCNEMAR_P
    assert "95% CI" in page.locator(".stat", has_text="delta, points").inner_text()

    # Flips first: the 3 regressions, then the 14 improvements.
    kinds = page.locator("#compare-rows tbody tr").evaluate_all("rows => rows.map(r => r.className)")
    assert kinds[:BROKEN] == ["regression"] * BROKEN, kinds[:20]
    assert kinds[BROKEN : BROKEN + FIXED] == ["improvement"] * FIXED, kinds[:20]
    # Per-scorer deltas arrive after the page (htmx load).
    deltas = page.locator("#scorer-deltas table")
    expect(deltas.get_by_role("row", name=re.compile("exact_match"))).to_contain_text("B higher")
    shot(page, "compare")


# -- playground: chat, capture as a case, find it in the set -----------------------------------


def test_playground_conversation_becomes_a_case_in_the_set(member_page: Page) -> None:
    page = member_page
    page.goto("/playground/")
    expect(page.get_by_role("heading", name="Playground")).to_be_visible()
    page.select_option("select[name=target]", "adder")
    page.fill("input[name=variant]", "v2")
    shot(page, "playground")
    page.get_by_role("button", name="New chat").click()
    page.wait_for_url(re.compile(r"/playground/\d+/$"))

    replies = page.locator(".msg.assistant")
    for question, answer, turn in (("what is 20 + 22?", "42", 1), ("and 5 + 6?", "11", 2)):
        page.fill("textarea[name=content]", question)
        page.get_by_role("button", name="Send").click()
        expect(replies).to_have_count(turn)
        expect(replies.nth(turn - 1)).to_contain_text(answer)
        expect(replies.nth(turn - 1)).to_contain_text("1 tool call: add")
    expect(page.locator(".msg.user")).to_have_count(2)
    shot(page, "playground_chat")

    page.get_by_role("link", name="Add this conversation as an eval case").click()
    page.wait_for_url(re.compile(r"/playground/\d+/capture/$"))
    # Pre-filled: the two turns as one conversation case, each turn's answer and tool call offered
    # as its expected value (issue 25), editable before saving.
    captured_input = json.loads(page.locator("textarea[name=input]").input_value())
    assert captured_input == {"turns": ["what is 20 + 22?", "and 5 + 6?"]}
    offered = json.loads(page.locator("textarea[name=expected]").input_value())
    assert [turn["final_response"] for turn in offered] == ["42", "11"]
    assert [[call["name"] for call in turn["tool_calls"]] for turn in offered] == [["add"], ["add"]]
    expect(page.locator("#conversation-turns tbody tr")).to_have_count(2)
    expect(page.locator("#expected-shape")).to_have_text("one expected value per turn (a conversation case)")
    offered[0] = {}  # edited: the first turn is held to nothing
    page.fill("textarea[name=expected]", json.dumps(offered))
    page.select_option("select[name=eval_set]", label=SET_NAME)
    page.fill("input[name=case_id]", "captured-sum")
    page.select_option("select[name=split]", "train")
    page.fill("input[name=tags]", "playground, captured")
    shot(page, "capture")
    page.get_by_role("button", name="Save case").click()

    # Back on the set's case browser, narrowed to the new case.
    page.wait_for_url(re.compile(r"/sets/\d+/\?q=captured-sum"))
    expect(page.get_by_role("heading", name=f"Set {SET_NAME}")).to_be_visible()
    row = page.locator("#cases tbody tr", has_text="captured-sum")
    expect(row).to_have_count(1)
    expect(row).to_contain_text("train")
    expect(row).to_contain_text("playground, captured")
    expect(row).to_contain_text("and 5 + 6?")
    shot(page, "set_captured")

    # And through the browser's own filters: the train split, tag "captured".
    page.goto(page.url.split("?")[0])
    page.select_option("select[name=split]", "train")
    page.fill("input[name=tag]", "captured")
    page.get_by_role("button", name="Filter").click()
    expect(page.locator("#cases tbody tr")).to_have_count(1)
    expect(page.locator("#cases tbody tr")).to_contain_text("captured-sum")


def test_first_hour_json_target_text_errors_capture_and_run(member_page: Page) -> None:
    """Issue 11: chat with a JSON target by typing text, see a bad input's error on the page,
    capture the conversation with a valid expected value, and run the new case at once."""
    page = member_page
    page.goto("/playground/")
    page.select_option("select[name=target]", "json-adder")
    page.get_by_role("button", name="New chat").click()
    page.wait_for_url(re.compile(r"/playground/\d+/$"))
    template = page.locator(".input-template")
    expect(template).to_contain_text("takes JSON like this")
    expect(template).to_contain_text("sent as question")

    # a bad input: the 400 answer is shown beside the input (htmx would drop it by default)
    page.fill("textarea[name=content]", '{"question": ')
    page.get_by_role("button", name="Send").click()
    expect(page.locator(".field-error")).to_contain_text("this target takes JSON: line 1 column")
    expect(page.locator(".msg.user")).to_have_count(0)

    # plain text: sent as the question of the set's first case
    page.fill("textarea[name=content]", "what is 20 + 22?")
    page.get_by_role("button", name="Send").click()
    expect(page.locator(".msg.assistant")).to_have_count(1)
    expect(page.locator(".msg.assistant")).to_contain_text("42")
    expect(page.locator(".field-error")).to_have_count(0)
    shot(page, "first_hour_json_chat")

    # any other failed htmx answer: a banner with the page's own message
    page.evaluate("htmx.ajax('GET', '/runs/no-such-run/', {target: '#content'})")
    expect(page.locator("#htmx-error")).to_be_visible()
    expect(page.locator("#htmx-error")).to_contain_text("The request failed (404")

    page.get_by_role("link", name="Add this conversation as an eval case").click()
    page.wait_for_url(re.compile(r"/playground/\d+/capture/$"))
    expect(page.locator("select[name=eval_set] option:checked")).to_have_text(SET_NAME)
    assert page.locator("textarea[name=expected]").input_value() == '"42"'
    assert '"question": "what is 20 + 22?"' in page.locator("textarea[name=input]").input_value()
    page.fill("input[name=case_id]", "json-captured")
    page.select_option("select[name=split]", "train")  # the dev split's 60 cases stay as they are
    # an expected value in another shape is refused before saving, beside the field
    page.fill("textarea[name=expected]", '{"answer": "42"}')
    page.get_by_role("button", name="Save case").click()
    expect(page.get_by_text("this set's cases expect a string; this is a JSON object")).to_be_visible()
    page.fill("textarea[name=expected]", '"42"')
    shot(page, "first_hour_capture")
    page.get_by_role("button", name="Save and run it").click()
    page.wait_for_url(re.compile(r"/runs/[0-9a-f]+/$"))
    expect(page.locator("#run-head-status")).to_have_text("finished", timeout=30_000)
    assert leading_int(stat(page, "passed")) == 1
    expect(page.locator("#results-body")).to_contain_text("json-captured")
    shot(page, "first_hour_case_run")


# -- the other pages a reviewer looks at ----------------------------------------------------------


def test_sets_splits_and_trends_pages(viewer_page: Page, site: Site) -> None:
    page = viewer_page
    sid = set_id(page)
    expect(page.get_by_role("row", name=re.compile(SET_NAME))).to_be_visible()
    shot(page, "sets")
    page.get_by_role("link", name=SET_NAME, exact=True).first.click()
    page.wait_for_url(re.compile(rf"/sets/{sid}/$"))
    assert leading_int(stat(page, "dev")) == DEV_CASES
    assert leading_int(stat(page, "train")) >= 10
    shot(page, "set")
    page.get_by_role("link", name="adder / v2").click()
    page.wait_for_url(re.compile(rf"/sets/{sid}/splits/\?"))
    expect(page.locator("body")).to_contain_text("93.3%")
    shot(page, "splits")
    page.goto(f"/trends/?set={sid}")
    expect(page.locator("svg").first).to_be_visible()
    shot(page, "trends")
    page.goto("/traces/")
    shot(page, "traces")


def test_trends_and_splits_open_non_empty_and_compare_fits_a_phone(viewer_page: Page, site: Site) -> None:
    """Issue 11: trends and the splits view opened bare show a set/variant that has runs (no
    "-0%" tick), the site has a favicon, and the compare page fits a 390 px-wide screen."""
    page = viewer_page
    page.goto("/trends/")
    expect(page.locator("select[name=set] option:checked")).to_have_text(SET_NAME)
    expect(page.locator("#trend-chart svg path[d^=M]").first).to_be_attached()
    ticks = page.locator("#trend-chart svg text").all_text_contents()
    assert ticks and not any((t or "").strip().startswith("-0") for t in ticks), ticks
    sid = set_id(page)
    page.goto(f"/sets/{sid}/splits/")
    expect(page.locator("h1")).not_to_contain_text("pick a target")
    expect(page.locator("table tbody tr").first).not_to_contain_text("No finished runs")
    icon = page.request.get("/favicon.ico")
    assert icon.ok and "svg" in icon.headers.get("content-type", ""), icon.headers
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"/compare/?a={site.run_v1}&b={site.run_v2}")
    expect(page.locator("#verdict")).to_be_visible()
    width = page.evaluate("document.documentElement.scrollWidth")
    shot(page, "compare_phone")
    assert width <= 390, f"the compare page is {width} px wide on a 390 px screen"


def test_an_800_case_run_watched_live_keeps_a_bounded_page(member_page: Page) -> None:
    # before: one row appended per case (an 814-case run grew to 815 rows, 27k px)
    page = member_page
    page.goto("/runs/new/")
    page.select_option("select[name=eval_set]", label=BIG_SET_NAME)
    page.select_option("select[name=target]", "adder")
    page.fill("input[name=variant]", "v1")
    page.select_option("select[name=split]", "dev")
    page.get_by_role("button", name=re.compile("^start", re.I)).click()
    page.wait_for_url(re.compile(r"/runs/[0-9a-f]+/$"))
    page.evaluate("window.__e2e_no_reload = true")
    rows_seen: list[int] = []
    heights: list[int] = []
    deadline = time.monotonic() + 300  # generous: only bounds a run that never finishes
    while True:
        rows_seen.append(page.locator("tr[id^=live-result-], tr[id^=result-]").count())
        heights.append(page.evaluate("document.documentElement.scrollHeight"))
        if leading_int(stat(page, "cases done")) == BIG_CASES and "finished" in stat(page, "status"):
            break
        assert time.monotonic() < deadline, "the 800-case run did not finish"
        time.sleep(0.1)
    assert page.evaluate("window.__e2e_no_reload") is True, "the page was reloaded"
    # bounded while running and after: the live block (20) or the first page of the table (50)
    assert max(rows_seen) <= 50, f"the page grew with the run: up to {max(rows_seen)} rows"
    expect(page.locator("#results-body tr[id^=result-]")).to_have_count(50)
    expect(page.locator("#results-footer")).to_have_text(re.compile(rf"^{BIG_CASES} cases"))
    assert max(heights) < 8000, f"the page grew to {max(heights)} px"
    # adder v1 fails a % 4 == 0: 200 of the 800
    assert leading_int(stat(page, "failed")) == BIG_CASES // 4
    assert leading_int(stat(page, "passed")) == BIG_CASES - BIG_CASES // 4
