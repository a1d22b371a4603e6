"""A hostile case bank (ids, inputs, outputs, errors, tags and the set name holding script and
markup) rendered on every page in Chromium: no dialog opens, no policy violation is reported,
and no element from the data ends up in the DOM (markup is always shown as text)."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page

from tests.e2e.conftest import (
    EVALSITE,
    REPO,
    clean_env,
    evalsite,
    free_port,
    login,
    stop,
    wait_until_up,
)
from tests.support.databases import subprocess_db_env

PAYLOADS = [
    "<script>alert('s')</script>",
    '"><img src=x onerror=alert(1)>',
    "'><svg onload=alert(2)>",
    "javascript:alert(3)",
    "{{ 7*7 }}<iframe srcdoc='<script>alert(4)</script>'>",
]
SET_NAME = "<svg onload=alert('set')>"

TARGET = """
from evalcore.discovery import TargetSpec


async def hostile(question, ctx):
    with ctx.tracer.span("execute_tool", "<b onmouseover=alert(5)>tool</b>", arguments={"q": question}) as span:
        span.set(result=question)
    if "iframe" in question:
        raise RuntimeError(question)
    return question


spec = TargetSpec(id="hostile", target=hostile, scorers=["exact_match"])
"""


@pytest.fixture(scope="module")
def hostile_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("hostile")
    agents = root / "agents"
    agents.mkdir()
    (agents / "hostile_agents.py").write_text(TARGET)
    bank = root / "bank.jsonl"
    rows = [
        {"id": p, "input": p, "expected": p if i % 2 else "other " + p, "tags": [p], "split": "dev"}
        for i, p in enumerate(PAYLOADS)
    ]
    bank.write_text("".join(json.dumps(r) + "\n" for r in rows))
    env = clean_env(
        **subprocess_db_env(root / "evalsite.sqlite3"),
        EVALSITE_DATA_DIR=str(root / "var"),
        EVALSITE_AGENTS_DIR=str(agents),
        DJANGO_SETTINGS_MODULE="evalsite.settings",
    )
    log = root / "server.log"
    evalsite("migrate", "--verbosity", "0", env=env, log=log)
    evalsite("demo_users", env=env, log=log)
    evalsite("import", str(bank), "--name", SET_NAME, env=env, log=log)
    for _ in range(2):
        evalsite("eval", str(agents), "--set", SET_NAME, "--target", "hostile", "--quiet", env=env, log=log)
    port = free_port()
    with log.open("ab") as out:
        server = subprocess.Popen(
            [*EVALSITE, "serve", "--host", "127.0.0.1", "--port", str(port), "--no-worker"],
            env=env,
            cwd=REPO,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(url, server, log)
        yield url
    finally:
        stop(server)


@pytest.fixture
def staff_page(browser: Browser, hostile_site: str) -> Iterator[Page]:
    context = browser.new_context(base_url=hostile_site, viewport={"width": 1280, "height": 900})
    context.set_default_timeout(10_000)
    page = context.new_page()
    login(page, "admin")
    yield page
    context.close()


INJECTED = """() => [...document.querySelectorAll(
    'script:not([src]):not([type="application/json"]), [onerror], [onload], [onmouseover], iframe, svg[onload], '
    + 'img[src="x"], a[href^="javascript:"]')].map(e => e.outerHTML.slice(0, 120))"""


def test_hostile_data_is_inert_on_every_page(staff_page: Page) -> None:
    page = staff_page
    dialogs: list[str] = []
    violations: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.on("console", lambda m: violations.append(m.text) if "Content Security Policy" in m.text else None)

    def visit(path: str) -> None:
        response = page.goto(path)
        assert response is not None and response.status < 500, path
        page.wait_for_load_state("networkidle")
        injected = page.evaluate(INJECTED)
        assert injected == [], (path, injected)

    start = ["/", "/runs/", "/sets/", "/traces/", "/trends/", "/compare/", "/playground/", "/admin/"]
    for path in start:
        visit(path)
    page.goto("/runs/")
    runs = sorted(set(re.findall(r"/runs/([0-9a-f]{16})/", page.content())))
    assert len(runs) == 2
    page.goto("/sets/")
    set_path = re.findall(r'href="(/sets/\d+/)"', page.content())[0]
    more = [
        set_path,
        set_path + "splits/",
        f"/compare/?a={runs[0]}&b={runs[1]}",
        f"/trends/?set={set_path.split('/')[2]}",
    ]
    for run_id in runs:
        more.append(f"/runs/{run_id}/")
        page.goto(f"/runs/{run_id}/")
        more += sorted(set(re.findall(rf'href="(/runs/{run_id}/cases/\d+/[^"]*)"', page.content())))
    page.goto("/traces/")
    more += sorted(set(re.findall(r'href="(/traces/\d+/)"', page.content())))
    page.goto(f"/compare/?a={runs[0]}&b={runs[1]}")
    more += sorted(set(re.findall(r'href="(/compare/case/\?[^"]+)"', page.content())))[:5]
    more += ["/admin/evals/evalcase/", "/admin/evals/evalrun/", "/admin/traces/run/", "/admin/evals/evalresult/"]
    for path in more:
        visit(path.replace("&amp;", "&"))
    page.goto(f"/runs/{runs[0]}/")
    shown = page.inner_text("body")
    assert "<script>alert('s')</script>" in shown and "onerror=alert(1)" in shown  # shown, as text
    assert len(more) > 15
    assert dialogs == [] and violations == []
