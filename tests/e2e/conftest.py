"""Browser tests: the real stack (`evalsite serve`: daphne + the task worker) on a temp SQLite file
(a fresh PostgreSQL database when ``DATABASE_URL`` is set), driven by Playwright on Debian's chromium.

Run them on their own (Playwright's sync API leaves an event loop running, which breaks later
async tests in the same session)::

    .venv/bin/python -m pytest -q tests/e2e -p no:cacheprovider -o addopts=""

``make test-e2e`` adds ``-n 2 --dist loadfile`` (pytest-xdist): each worker's session has its
own data, server and port (``tmp_path_factory`` and :func:`free_port` are per worker), and a
file's tests stay together, in order, on one worker.

The session fixture prepares the data with the CLI as a user would (migrate, import a case bank,
demo users, two CLI evals of two variants), starts the server in its own process group, waits
until it answers, and stops it at the end. Screenshots of every page visited land in
``tests/e2e/screenshots/`` (not committed).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import cast
from urllib.parse import urlsplit

import pytest
from playwright._impl._api_structures import SetCookieParam
from playwright.sync_api import Browser, BrowserContext, Page, expect, sync_playwright

from tests.support.databases import subprocess_db_env
from tests.support.signals import default_signals_in_child

# Playwright's sync API runs an event loop in this thread; Django must not refuse sync ORM calls.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

REPO = Path(__file__).resolve().parents[2]
EVALSITE = [sys.executable, "-m", "evalsite.cli"]
SCREENSHOTS = Path(__file__).resolve().parent / "screenshots"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]

SET_NAME = "e2e_arith"
DEV_CASES = 60
BIG_SET_NAME = "e2e_big"
BIG_CASES = 800  # an 800-case run watched live: the page must stay bounded
PASSWORDS = {"admin": "admin", "member": "member", "viewer": "viewer"}


@dataclass(frozen=True)
class Site:
    """The running stack: its address, its files, and the two CLI runs made before it started."""

    url: str
    db: Path
    agents_dir: Path
    log: Path
    run_v1: str
    run_v2: str


_MADE: dict[tuple[str, str], object] = {}


def once_per_site[T](site: Site, name: str, make: Callable[[], T]) -> T:
    """``make()``, called once per site and remembered under ``name``: the data several test
    modules read (the conversation, layout and rules-demo runs) is written to the site's database
    once per session (per xdist worker), not once per module that reads it."""
    key = (site.url, name)
    if key not in _MADE:
        _MADE[key] = make()
    return cast(T, _MADE[key])


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without Django/Evalsite settings, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "EVALSITE_"))}
    env.update(PYTHONUNBUFFERED="1", **extra)
    return env


def write_case_bank(path: Path) -> Path:
    """60 dev, 10 train and 5 test cases ``a + b`` (``a`` is the case number)."""
    splits = ["dev"] * DEV_CASES + ["train"] * 10 + ["test"] * 5
    with path.open("w", encoding="utf-8") as handle:
        for a, split in enumerate(splits):
            b = (a * 7) % 11 + 1
            case = {
                "id": f"case-{a:03d}",
                "input": {"question": f"what is {a} + {b}?", "a": a, "b": b},
                "expected": str(a + b),
                "tags": ["arith", "even" if a % 2 == 0 else "odd"],
                "split": split,
            }
            handle.write(json.dumps(case) + "\n")
    return path


def write_big_case_bank(path: Path) -> Path:
    """``BIG_CASES`` dev cases ``a + b`` for the ``adder`` target (fails ``a % 4 == 0`` in v1)."""
    with path.open("w", encoding="utf-8") as handle:
        for a in range(BIG_CASES):
            b = (a * 7) % 11 + 1
            case = {"id": f"big-{a:04d}", "input": {"question": f"what is {a} + {b}?", "a": a, "b": b}}
            handle.write(json.dumps({**case, "expected": str(a + b), "split": "dev"}) + "\n")
    return path


def evalsite(*args: str, env: dict[str, str], log: Path) -> str:
    """Run one ``evalsite`` CLI command to completion; its output is appended to ``log``."""
    done = subprocess.run(
        [*EVALSITE, *args], env=env, cwd=REPO, capture_output=True, text=True, timeout=120, check=False
    )
    with log.open("a", encoding="utf-8") as handle:
        handle.write(f"$ evalsite {' '.join(args)}\n{done.stdout}{done.stderr}\n")
    if done.returncode != 0:
        raise RuntimeError(f"evalsite {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def run_id_of(out: str, what: str) -> str:
    """The id in ``evalsite eval``'s "eval run <id>" line of ``out`` (``what`` names the run in the error)."""
    found = re.search(r"eval run ([0-9a-f]{16})", out)
    assert found, f"no run id in the output of {what}:\n{out}"
    return found.group(1)


def wait_until_up(url: str, server: subprocess.Popen[bytes], log: Path, timeout_s: float = 120.0) -> None:
    """Poll the login page until it answers 200 (or fail with the server's output)."""
    deadline = time.monotonic() + timeout_s
    while True:
        if server.poll() is not None:
            raise RuntimeError(f"evalsite serve exited {server.returncode}:\n{log.read_text()}")
        try:
            with urllib.request.urlopen(f"{url}/accounts/login/", timeout=2) as response:
                if response.status == 200:
                    return
        except (OSError, urllib.error.URLError):
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"evalsite serve did not answer in {timeout_s:.0f} s:\n{log.read_text()}")
        time.sleep(0.2)


def stop(server: subprocess.Popen[bytes]) -> None:
    """Ctrl-C the server (it stops its worker in order), then make sure both are gone."""
    children = subprocess.run(["pgrep", "-P", str(server.pid)], capture_output=True, text=True).stdout.split()
    if server.poll() is None:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=5)
    # The worker runs in its own session (so Ctrl-C reaches only serve): kill any leftover by id.
    for pid in children:
        try:
            os.killpg(int(pid), signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """The prepared data and the running `evalsite serve`, for the whole session."""
    root = tmp_path_factory.mktemp("e2e")
    agents = root / "agents"
    agents.mkdir()
    shutil.copy(Path(__file__).with_name("e2e_agents.py"), agents / "e2e_agents.py")
    bank = write_case_bank(root / f"{SET_NAME}.jsonl")
    db = root / "evalsite.sqlite3"
    log = root / "server.log"
    env = clean_env(
        **subprocess_db_env(db),
        EVALSITE_DATA_DIR=str(root / "var"),
        EVALSITE_AGENTS_DIR=str(agents),
        DJANGO_SETTINGS_MODULE="evalsite.settings",
    )
    evalsite("migrate", "--verbosity", "0", env=env, log=log)
    # Password hashing makes demo_users the slowest step: it runs alongside import and the evals.
    users = subprocess.Popen(
        [*EVALSITE, "demo_users"], env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    evalsite("import", str(bank), env=env, log=log)
    evalsite("import", str(write_big_case_bank(root / f"{BIG_SET_NAME}.jsonl")), env=env, log=log)
    run_ids = []
    for variant in ("v1", "v2"):
        printed = evalsite(
            "eval", str(agents), "--set", SET_NAME, "--target", "adder", "--variant", variant, "--quiet",
            env=env, log=log,
        )  # fmt: skip
        run_ids.append(run_id_of(printed, f"the CLI eval of adder {variant}"))
    run_v1, run_v2 = run_ids
    _, errors = users.communicate(timeout=120)
    if users.returncode != 0:
        raise RuntimeError(f"evalsite demo_users exited {users.returncode}:\n{errors}")

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with log.open("ab") as out:
        server = subprocess.Popen(
            [*EVALSITE, "serve", "--host", "127.0.0.1", "--port", str(port), "--worker-grace", "3"],
            env=env,
            cwd=REPO,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, so teardown can reach everything it started
            preexec_fn=default_signals_in_child,  # teardown presses Ctrl-C: not ignored under nohup / in CI
        )
    try:
        wait_until_up(url, server, log)
        yield Site(url=url, db=db, agents_dir=agents, log=log, run_v1=run_v1, run_v2=run_v2)
    finally:
        stop(server)


@pytest.fixture(scope="session")
def browser(site: Site) -> Iterator[Browser]:
    """Headless Debian chromium (started after the server, stopped before it)."""
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


# expect() polls until its condition holds; the deadline only bounds a page that never gets there
expect.set_options(timeout=60_000)


def open_context(browser: Browser, site: Site) -> BrowserContext:
    """A fresh browser context (its own cookies) on the site. Its timeouts only bound a page that
    never comes: generous, so that a busy machine (CI, other jobs) cannot fail a test."""
    context = browser.new_context(base_url=site.url, viewport={"width": 1280, "height": 900})
    context.set_default_timeout(60_000)
    return context


_SESSIONS: dict[tuple[str, str], list[SetCookieParam]] = {}
"""``(site origin, username)`` -> the cookies of the first form login of that user on that site."""


def login(page: Page, username: str) -> None:
    """Log in as a demo user and land on the home page.

    The first login of ``username`` on a site goes through the login form; later ones give the
    page's context that login's session cookies (the same user in a second browser): the form
    posts the password, whose deliberately slow hash check would otherwise be paid by every test.
    A cookie the server no longer accepts (the session ended) falls back to the form.
    """
    page.goto("/accounts/login/")
    parts = urlsplit(page.url)
    key = (f"{parts.scheme}://{parts.netloc}", username)
    cookies = _SESSIONS.get(key)
    if cookies:
        page.context.add_cookies(cookies)
        page.goto("/")
        if "/accounts/login/" not in page.url:
            return
        page.context.clear_cookies()
        page.goto("/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORDS[username])
    page.click("form [type=submit]")
    page.wait_for_url(lambda url: "/accounts/login/" not in url)
    _SESSIONS[key] = [
        SetCookieParam(
            name=c["name"],
            value=c["value"],
            domain=c["domain"],
            path=c["path"],
            expires=c["expires"],
            httpOnly=c["httpOnly"],
            secure=c["secure"],
            sameSite=c["sameSite"],
        )
        for c in page.context.cookies()
    ]


def shot(page: Page, name: str) -> Path:
    """Save a full-page screenshot as ``screenshots/<name>.png``."""
    SCREENSHOTS.mkdir(exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


@pytest.fixture
def member_page(browser: Browser, site: Site) -> Iterator[Page]:
    """A page logged in as member/member."""
    context = open_context(browser, site)
    page = context.new_page()
    login(page, "member")
    yield page
    context.close()


@pytest.fixture
def viewer_page(browser: Browser, site: Site) -> Iterator[Page]:
    """A page logged in as viewer/viewer."""
    context = open_context(browser, site)
    page = context.new_page()
    login(page, "viewer")
    yield page
    context.close()


@pytest.fixture
def anonymous_page(browser: Browser, site: Site) -> Iterator[Page]:
    """A page with no session."""
    context = open_context(browser, site)
    yield context.new_page()
    context.close()
