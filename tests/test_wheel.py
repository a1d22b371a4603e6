"""``pip install evalsite`` works (issue 14 §4): the wheel is complete, and installed in a fresh
venv outside the checkout it makes a project (``evalsite init``), runs an eval into the project's
``var/``, runs the demo from its packaged examples, and serves a styled page with htmx.

Offline: the wheel is built with ``--no-isolation`` (setuptools and build come with the dev
extra) and installed with ``--no-deps --no-index``; the new venv finds the dependencies through a
``.pth`` line naming this interpreter's site-packages (a line naming a folder adds it to
``sys.path``; the ``.pth`` files *in* that folder, among them the editable install's, are not
run, so the checkout is not importable there, which the test checks).

``pytest -m packaging`` runs these alone.
"""

from __future__ import annotations

import http.cookiejar
import os
import queue
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import sysconfig
import threading
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path

import pytest

from tests.support.signals import default_signals_in_child

pytestmark = pytest.mark.packaging

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = {"evalcore": "evalcore", "apps": "apps", "evalsite": "evalsite", "examples": "evalsite_examples"}
"""Checkout folder -> its place in the wheel: every file under it must be there."""
BUILD_FILES = ("pyproject.toml", "setup.py", "README.md")


def _skip(path: str, names: list[str]) -> set[str]:
    return {n for n in names if n == "__pycache__" or n.endswith(".pyc")}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from a copy of the checkout (the build writes build/ and egg-info where
    it runs, never into the checkout the other tests use)."""
    src = tmp_path_factory.mktemp("src")
    for name in BUILD_FILES:
        shutil.copy2(ROOT / name, src / name)
    for folder in SHIPPED:
        shutil.copytree(ROOT / folder, src / folder, ignore=_skip)
    done = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(src / "dist"), str(src)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (built,) = (src / "dist").glob("evalsite-*-py3-none-any.whl")
    return built


def test_the_wheel_holds_every_template_static_file_migration_and_example(wheel: Path):
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = set()
    for folder, packaged in SHIPPED.items():
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                expected.add(f"{packaged}/{path.relative_to(ROOT / folder).as_posix()}")
    missing = sorted(expected - names)
    assert not missing, f"{len(missing)} files not in the wheel, e.g. {missing[:10]}"
    # the parts a page and a project need, named (a change to the walk above cannot hide them)
    for name in (
        "evalsite/templates/base.html",
        "evalsite/templates/registration/login.html",
        "evalsite/static/evalsite/site.css",
        "evalsite/static/evalsite/favicon.svg",
        "evalsite/static/evalsite/htmx-errors.js",
        "apps/evals/migrations/0001_initial.py",
        "apps/core/migrations/0001_initial.py",
        "apps/traces/migrations/0001_initial.py",
        "apps/agents/migrations/0001_initial.py",
        "evalsite/project_template/agents/calculator.py",
        "evalsite/project_template/sets/example.jsonl",
        "evalsite/project_template/env",
        "evalsite_examples/sets/gsm8k_test.jsonl",
        "evalsite_examples/agents/gsm8k_replay.py",
        "evalsite_examples/agents/data/gsm8k_example_model_solutions.jsonl.gz",
    ):
        assert name in names, name
    # nothing of a checkout's data, tests or tooling
    assert not [n for n in names if n.split("/")[0] in ("var", "tests", "bench", "scripts", "docs", "mutants")]
    assert not [n for n in names if "__pycache__" in n or n.endswith((".pyc", ".sqlite3"))]
    # htmx comes from django-htmx, not a copy of ours
    assert not [n for n in names if re.search(r"(^|/)htmx[^/]*\.js$", n) and "htmx-errors" not in n]


# -- installed outside the checkout ------------------------------------------------------------


def _clean_env(venv: Path) -> dict[str, str]:
    """The environment of a user's shell with the venv on PATH: no settings of this test run, no
    PYTHONPATH (the checkout must not be importable)."""
    drop = {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "DATABASE_URL", "PYTHONSTARTUP"}
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith(("EVALSITE_", "DJANGO_"))}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", PYTHONUNBUFFERED="1", COLUMNS="120")
    return env


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv in a temp folder with the wheel installed (no network, no checkout)."""
    venv = tmp_path_factory.mktemp("installed") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
        env=_clean_env(venv),
    ).stdout.strip()
    deps = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    Path(purelib, "_evalsite_test_deps.pth").write_text("".join(f"{d}\n" for d in sorted(deps)))
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return venv


def run(venv: Path, *args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run one command of the venv (``evalsite ...`` or ``python ...``) from ``cwd``."""
    return subprocess.run(
        [str(venv / "bin" / args[0]), *args[1:]],
        cwd=cwd,
        env=_clean_env(venv),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_the_installed_package_is_imported_from_the_venv_not_the_checkout(venv: Path, tmp_path: Path):
    code = (
        "import apps, evalcore, evalsite, evalsite.paths as p; "
        "print(evalsite.__file__, evalcore.__file__, list(apps.__path__)[0], p.examples_dir(), p.is_checkout())"
    )
    done = run(venv, "python", "-c", code, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    *paths, checkout = done.stdout.split()
    assert checkout == "False"
    for path in paths:
        assert Path(path).is_relative_to(venv), (path, venv)
    assert Path(paths[-1], "agents", "gsm8k_replay.py").is_file()


def test_init_eval_demo_and_serve_from_the_installed_wheel(venv: Path, tmp_path: Path):
    # init: a project folder; a second init refuses (exit 2, nothing written); --force rewrites
    made = run(venv, "evalsite", "init", "proj", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    proj = tmp_path / "proj"
    for name in ("agents/calculator.py", "sets/example.jsonl", ".env", ".gitignore", "README.md"):
        assert (proj / name).is_file(), name
    assert "cd proj" in made.stdout and "evalsite eval agents --set sets/example.jsonl" in made.stdout
    (proj / "README.md").write_text("mine\n")
    again = run(venv, "evalsite", "init", "proj", cwd=tmp_path)
    assert again.returncode == 2 and "README.md" in again.stderr and "--force" in again.stderr
    assert (proj / "README.md").read_text() == "mine\n"
    assert not (tmp_path / "var").exists()  # init writes no data folder
    assert run(venv, "evalsite", "init", "proj", "--force", cwd=tmp_path).returncode == 0

    # eval: the init'd target on the init'd set, stored in proj/var/
    for variant, gate in (("careful", "pass_rate>=1"), ("hasty", "pass_rate>=0.5")):
        done = run(venv, "evalsite", "eval", "agents", "--set", "sets/example.jsonl", "--target", "calculator",
                   "--variant", variant, "--gate", gate, "--quiet", cwd=proj)  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
    db = proj / "var" / "evalsite.sqlite3"
    with sqlite3.connect(db) as conn:
        runs = conn.execute("select variant, n_passed, n_done from evals_evalrun order by variant").fetchall()
    assert runs == [("careful", 4, 4), ("hasty", 2, 4)]

    # demo: its sets and agents come from the installed package
    demo = run(venv, "evalsite", "demo", "--only", "BFCL", cwd=proj)
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    examples = installed_package(venv).parent / "evalsite_examples"
    assert f"imported {examples / 'sets' / 'bfcl_simple_python.jsonl'} -> set" in demo.stdout, demo.stdout
    with sqlite3.connect(db) as conn:
        bfcl = conn.execute("select variant, status from evals_evalrun where target_id='bfcl-rules' order by variant")
        assert bfcl.fetchall() == [("keyword", "finished"), ("strict", "finished")]
    assert run(venv, "evalsite", "demo_users", cwd=proj).returncode == 0

    # serve: a page, its CSS and htmx (from django-htmx), on a free port
    with serving(venv, proj) as url:
        browser = Browser(url)
        page, links = browser.log_in("viewer", "viewer")
        css = [link for link in links if link.endswith(".css")]
        htmx = [link for link in links if re.search(r"/django_htmx/htmx-2(\.min)?\.js$", link)]
        assert css == ["/static/evalsite/site.css"] and len(htmx) == 1, links
        assert not re.search(r"<script(?![^>]*\bsrc=)", page), "an inline script (the CSP forbids them)"
        body, kind = browser.get(css[0])
        assert kind.startswith("text/css")
        assert body == (installed_package(venv) / "static" / "evalsite" / "site.css").read_bytes()
        body, kind = browser.get(htmx[0])
        assert kind.split(";")[0] in ("text/javascript", "application/javascript")
        import django_htmx

        assert body == (Path(django_htmx.__file__).parent / "static" / htmx[0].removeprefix("/static/")).read_bytes()


def installed_package(venv: Path) -> Path:
    """The ``evalsite`` package folder inside ``venv``."""
    (found,) = venv.glob("lib/python*/site-packages/evalsite")
    return found


class _Reader(threading.Thread):
    """Copies a process's output lines into a queue (``None`` at the end), so the test waits for
    a line without blocking on a pipe that may stay open."""

    def __init__(self, stream) -> None:
        super().__init__(daemon=True)
        self.stream, self.lines, self.seen = stream, queue.Queue(), []

    def run(self) -> None:
        for line in self.stream:
            self.lines.put(line)
        self.lines.put(None)

    def wait_for(self, text: str, timeout: float) -> str:
        """The first line containing ``text``; fails with the output when the process ends first."""
        while True:
            try:
                line = self.lines.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"no {text!r} within {timeout:.0f} s:\n{''.join(self.seen)}") from None
            if line is None:
                raise AssertionError(f"the process ended before {text!r}:\n{''.join(self.seen)}")
            self.seen.append(line)
            if text in line:
                return line


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class serving:
    """``evalsite serve`` of the venv in ``proj``, up once it prints that it is serving (it does
    so when listening); Ctrl-C'd on exit, and its worker with it."""

    def __init__(self, venv: Path, proj: Path) -> None:
        self.argv = [str(venv / "bin" / "evalsite"), "serve", "--port", str(_free_port()), "--worker-grace", "3"]
        self.env, self.cwd = _clean_env(venv), proj

    def __enter__(self) -> str:
        self.server = subprocess.Popen(
            self.argv,
            cwd=self.cwd,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
            preexec_fn=default_signals_in_child,
        )
        self.reader = _Reader(self.server.stdout)
        self.reader.start()
        line = self.reader.wait_for("Evalsite is serving at", timeout=180)
        return re.search(r"http://[^/\s]+", line).group(0)

    def __exit__(self, *exc: object) -> None:
        children = subprocess.run(["pgrep", "-P", str(self.server.pid)], capture_output=True, text=True).stdout.split()
        self.server.send_signal(signal.SIGINT)
        try:
            self.server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.server.pid, signal.SIGKILL)
            self.server.wait(timeout=10)
        for pid in children:  # the worker has its own session; gone with serve, unless it hung
            try:
                os.killpg(int(pid), signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


class Browser:
    """Requests to the served site with one session's cookies (urllib: no extra dependency)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))

    def get(self, path: str, data: dict[str, str] | None = None) -> tuple[bytes, str]:
        """GET (or POST ``data`` to) ``path``, redirects followed; (body, content type) of a 200."""
        body = urllib.parse.urlencode(data).encode() if data is not None else None
        request = urllib.request.Request(self.url + path, data=body, headers={"Referer": self.url + path})
        with self.opener.open(request, timeout=60) as response:
            assert response.status == 200, (path, response.status)
            return response.read(), response.headers.get("Content-Type", "")

    def log_in(self, username: str, password: str) -> tuple[str, list[str]]:
        """Log in through the form; the home page's HTML and the static files it references."""
        form, _ = self.get("/accounts/login/")
        token = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', form).group(1).decode()
        home, kind = self.get(
            "/accounts/login/", {"csrfmiddlewaretoken": token, "username": username, "password": password}
        )
        page = home.decode()
        assert kind.startswith("text/html") and "Log out" in page, page[:2000]
        return page, re.findall(r'(?:href|src)="(/static/[^"]+)"', page)
