"""The pytest plugin (issue 14 §3): eval cases as test items, stored in the database `evalsite
eval` uses, the session judged by the same gates; inert when unused.

Each test runs pytest in a subprocess (a fresh interpreter: the plugin sets Django up with
Evalsite's settings itself, as it does in a team's project), loading the plugin through its
``pytest11`` entry point.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import tomllib
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from tests.support.databases import subprocess_db_env

ROOT = Path(__file__).resolve().parents[1]

AGENT = textwrap.dedent(
    """
    from evalcore.discovery import TargetSpec

    def good(text):
        return text.upper()

    def worse(text):  # one regression: case q2 ("c")
        return "nope" if text == "c" else text.upper()

    echo = TargetSpec(id="echo", variants={"good": good, "worse": worse}, scorers=["exact_match"])
    """
)


def test_the_plugin_is_declared_as_a_pytest11_entry_point():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["entry-points"]["pytest11"] == {"evalsite": "evalsite.pytest_plugin"}


def _entry_point_dir(tmp: Path) -> Path | None:
    """A dist-info declaring the plugin's entry point, for an environment installed before it
    existed (``pip install -e .`` again registers the real one); ``None`` when it is installed."""
    if any(ep.value == "evalsite.pytest_plugin" for ep in entry_points(group="pytest11")):
        return None
    info = tmp / "entry" / "evalsite_pytest_entry-0.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: evalsite-pytest-entry\nVersion: 0.0\n")
    (info / "entry_points.txt").write_text("[pytest11]\nevalsite = evalsite.pytest_plugin\n")
    return info.parent


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A team's project folder: agents, a case bank, a pytest.ini of its own."""
    folder = tmp_path / "project"
    (folder / "agents").mkdir(parents=True)
    (folder / "agents" / "echo.py").write_text(AGENT)
    (folder / "sets").mkdir()
    rows = [{"id": f"q{i}", "input": w, "expected": w.upper(), "split": "dev"} for i, w in enumerate("abcdefgh")]
    (folder / "sets" / "qa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "pytest.ini").write_text("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    return folder


def run_pytest(project: Path, *args: str, db: Path, xdist: bool = False) -> subprocess.CompletedProcess[str]:
    """pytest in ``project`` with the plugin from its entry point and Evalsite's database at ``db``."""
    dropped = ("DJANGO_SETTINGS_MODULE", "PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT")
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env.update(subprocess_db_env(db))
    extra = _entry_point_dir(project.parent)
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in (ROOT, extra) if p)
    env["COLUMNS"] = "200"
    options = ["-p", "no:django", "-p", "no:cacheprovider", *([] if xdist else ["-p", "no:xdist"])]
    return subprocess.run(
        [sys.executable, "-m", "pytest", *options, "--rootdir", str(project), *args],
        cwd=project,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def evalsite_cli(*args: str, db: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **subprocess_db_env(db), "COLUMNS": "200", "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "evalsite.cli", *args], cwd=ROOT, capture_output=True, text=True, env=env, timeout=300
    )


def tally(output: str) -> dict[str, int]:
    """pytest's last line as counts: ``{"failed": 1, "passed": 7}``."""
    last = output.strip().splitlines()[-1]
    return {word: int(n) for n, word in re.findall(r"(\d+) (passed|failed|errors?|skipped|deselected)", last)}


def test_unused_the_plugin_is_loaded_but_imports_no_django(project, tmp_path):
    (project / "test_plain.py").write_text(
        "import sys\n\n"
        "def test_plain():\n"
        "    assert 'django' not in sys.modules and 'evalsite.pytest_groups' not in sys.modules\n"
    )
    done = run_pytest(project, "-q", db=tmp_path / "e.sqlite3")
    assert done.returncode == 0, done.stdout + done.stderr
    assert tally(done.stdout) == {"passed": 1}
    helped = run_pytest(project, "--help", db=tmp_path / "e.sqlite3")
    assert "--evalsite-set" in helped.stdout  # loaded through the entry point
    assert not (tmp_path / "e.sqlite3").exists()  # and no database was touched


def test_options_turn_cases_into_items_stored_where_evalsite_eval_finds_them(project, tmp_path):
    db = tmp_path / "p.sqlite3"
    base = ["--evalsite-set", "sets/qa.jsonl", "--evalsite-target", "echo", "--evalsite-agents", "agents", "-q"]
    good = run_pytest(project, *base, "--evalsite-variant", "good", db=db)
    assert good.returncode == 0, good.stdout + good.stderr
    assert tally(good.stdout) == {"passed": 8}

    # without gates a failing case fails the session, as a failing test does
    worse = run_pytest(project, *base, "--evalsite-variant", "worse", db=db)
    assert worse.returncode == 1 and tally(worse.stdout) == {"failed": 1, "passed": 7}
    assert "evalsite[qa.jsonl]::q2 - case 'q2' failed" in worse.stdout
    assert "exact_match = False (output 'nope' != expected 'C')" in worse.stdout

    # with gates the gates decide
    held = run_pytest(project, *base, "--evalsite-variant", "worse", "--evalsite-gate", "pass_rate>=0.8", db=db)
    assert held.returncode == 0, held.stdout
    assert "every gate held: its 1 failing case(s) do not fail the session" in held.stdout

    summary = tmp_path / "summary.md"
    gated = run_pytest(
        project,
        *base,
        "--evalsite-variant",
        "worse",
        "--evalsite-baseline",
        "latest:good",  # the first session's run: stored in the database
        "--evalsite-gate",
        "regressions<=0",
        "--evalsite-summary-md",
        str(summary),
        db=db,
    )
    assert gated.returncode == 1, gated.stdout + gated.stderr
    assert (
        "1 regression(s), 0 improvement(s)" in gated.stdout and "gate regressions<=0: FAIL (actual 1)" in gated.stdout
    )
    text = summary.read_text()
    assert "failed: `regressions<=0`" in text and "| q2 | dev | 🔻 passed → failed |" in text

    # the runs are in the database `evalsite eval` uses: it finds the plugin's latest run
    cli = evalsite_cli(
        "eval", str(project / "agents"), "--set", str(project / "sets" / "qa.jsonl"), "--variant", "worse",
        "--baseline", "latest:worse", "--gate", "flips<=0", "--quiet", db=db,
    )  # fmt: skip
    assert cli.returncode == 0, cli.stdout + cli.stderr
    assert "0 regression(s), 0 improvement(s)" in cli.stdout


def test_the_decorator_runs_the_selected_cases_and_passes_each_to_the_function(project, tmp_path):
    (project / "test_qa.py").write_text(
        textwrap.dedent(
            """
            import evalsite

            @evalsite.cases("sets/qa.jsonl", target="echo", agents="agents", variant="good")
            def test_qa(case):
                assert case.scores == {"exact_match": True}
                assert case.output == case.expected == case.input.upper()
                assert case.case_id != "q5", "an extra check of the team's own"
            """
        )
    )
    db = tmp_path / "d.sqlite3"
    done = run_pytest(project, "-q", db=db)
    assert done.returncode == 1
    assert tally(done.stdout) == {"failed": 1, "passed": 7}
    assert "test_qa.py::test_qa::q5" in done.stdout and "an extra check of the team's own" in done.stdout

    # -k selects cases; only those run (the eval run has one case)
    one = run_pytest(project, "-q", "-k", "q1", db=db)
    assert one.returncode == 0, one.stdout + one.stderr
    assert tally(one.stdout) == {"passed": 1, "deselected": 7}
    assert re.search(r"test_qa · echo · good: eval run \w+, 1 case\(s\): 1 passed", one.stdout)

    # a failing gate fails the session even though every selected case passed
    (project / "test_qa.py").write_text(
        'import evalsite\n\n@evalsite.cases("sets/qa.jsonl", target="echo", agents="agents", variant="good",'
        ' gates=["pass_rate>=1", "n>=8"])\ndef test_qa():\n    pass\n'
    )
    gated = run_pytest(project, "-q", "-k", "q1", db=db)
    assert gated.returncode == 1 and "gate n>=8: FAIL (actual 1)" in gated.stdout


def test_refusals_are_clear(project, tmp_path):
    db = tmp_path / "r.sqlite3"
    base = ["--evalsite-set", "sets/qa.jsonl", "--evalsite-agents", "agents", "-q"]
    unknown = run_pytest(project, *base, "--evalsite-target", "nope", db=db)
    assert unknown.returncode == 4  # a usage error
    assert "--target 'nope': not declared in agents (targets: echo)" in unknown.stderr
    no_base = run_pytest(project, *base, "--evalsite-target", "echo", "--evalsite-gate", "worse_p>=0.05", db=db)
    assert no_base.returncode == 4 and "add --baseline" in no_base.stderr
    held_out = run_pytest(project, *base, "--evalsite-target", "echo", "--evalsite-split", "test", db=db)
    assert held_out.returncode == 4 and "allow" in held_out.stderr
    xdist = run_pytest(project, *base, "--evalsite-target", "echo", "-n", "2", db=db, xdist=True)
    assert xdist.returncode == 4 and "drop -n (pytest-xdist)" in xdist.stderr


def test_the_gsm8k_replay_as_1319_items_with_the_counts_of_evalsite_eval(project, tmp_path):
    db = tmp_path / "g.sqlite3"
    report = tmp_path / "cli.json"
    common = ["--split", "all", "--allow-test"]
    cli = evalsite_cli(
        "eval", "examples/agents", "--set", "examples/sets/gsm8k_test.jsonl", "--target", "gsm8k-replay",
        "--variant", "6b_finetuning", *common, "--quiet", "--json", str(report), db=db,
    )  # fmt: skip
    assert cli.returncode == 0, cli.stdout + cli.stderr
    cli_run = json.loads(report.read_text())
    counts = cli_run["report"]
    assert (counts["n"], counts["passed"], counts["failed"]) == (1319, 286, 1033)  # OpenAI's labels

    done = run_pytest(
        project,
        "--evalsite-set", str(ROOT / "examples" / "sets" / "gsm8k_test.jsonl"),
        "--evalsite-target", "gsm8k-replay",
        "--evalsite-agents", str(ROOT / "examples" / "agents"),
        "--evalsite-variant", "6b_finetuning",
        "--evalsite-split", "all", "--evalsite-allow-test",
        # case by case the same verdicts as the CLI's run, and the gate decides the session
        "--evalsite-baseline", cli_run["eval_run"]["id"], "--evalsite-gate", "flips<=0",
        "-q", "--tb=no",
        db=db,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    assert tally(done.stdout) == {"failed": 1033, "passed": 286}
    assert "1319 case(s): 286 passed, 1033 failed, 0 errored, 0 unscored" in done.stdout
    assert "0 regression(s), 0 improvement(s)" in done.stdout


PACED = textwrap.dedent(
    """
    import asyncio
    import os

    from evalcore.discovery import TargetSpec

    _in_flight = [0, 0]  # now, peak

    async def paced(text, ctx):
        _in_flight[0] += 1
        _in_flight[1] = max(_in_flight[1], _in_flight[0])
        with open(os.environ["PEAK_FILE"], "w") as f:
            f.write(str(_in_flight[1]))
        try:
            if "stuck" in (ctx.case.tags or []):
                await asyncio.sleep(3600)
            await asyncio.sleep(0.2)
        finally:
            _in_flight[0] -= 1
        return text.upper()

    paced_spec = TargetSpec(id="paced", target=paced, scorers=["exact_match"])
    """
)


def stored_configs(db: Path) -> list[dict[str, object]]:
    """The ``config`` of every eval run in ``db``, oldest first (read through Django: SQLite or PostgreSQL)."""
    code = (
        "import json; from apps.evals.models import EvalRun; "
        "print(json.dumps(list(EvalRun.objects.order_by('started').values_list('config', flat=True))))"
    )
    done = evalsite_cli("shell", "-c", code, db=db)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def settings_of(config: dict[str, object]) -> tuple[object, object, object]:
    return config["concurrency"], config["timeout_s"], config["repeat"]


@pytest.fixture
def paced_project(project: Path) -> Path:
    (project / "agents" / "paced.py").write_text(PACED)
    rows = [{"id": "fine", "input": "a", "expected": "A", "split": "dev"}]
    rows.append({"id": "stuck", "input": "b", "expected": "B", "split": "dev", "tags": ["stuck"]})
    (project / "sets" / "stuck.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return project


def test_a_decorated_set_honours_concurrency_and_timeout_from_the_command_line(paced_project, tmp_path):
    """bh-42: 8 cases at once under --evalsite-concurrency 1; a stuck case ran to the 60 s default."""
    (paced_project / "test_peak.py").write_text(
        'import evalsite\n\n@evalsite.cases("sets/qa.jsonl", target="paced", agents="agents")\n'
        "def test_peak(case):\n    pass\n"
    )
    (paced_project / "test_stuck.py").write_text(
        'import evalsite\n\n@evalsite.cases("sets/stuck.jsonl", target="paced", agents="agents")\n'
        "def test_stuck(case):\n    pass\n"
    )
    db, peak = tmp_path / "c.sqlite3", tmp_path / "peak"
    os.environ["PEAK_FILE"] = str(peak)
    try:
        one = run_pytest(paced_project, "-q", "test_peak.py", "--evalsite-concurrency", "1", db=db)
        assert one.returncode == 0, one.stdout + one.stderr
        assert tally(one.stdout) == {"passed": 8}
        assert peak.read_text() == "1"  # never two cases at once
        stuck = run_pytest(paced_project, "-q", "test_stuck.py", "--evalsite-timeout", "1", db=db)
    finally:
        del os.environ["PEAK_FILE"]
    assert tally(stuck.stdout) == {"passed": 1, "error": 1}, stuck.stdout + stuck.stderr
    assert "target exceeded the 1 s timeout" in stuck.stdout
    assert [settings_of(c) for c in stored_configs(db)] == [(1, 60.0, 1), (8, 1.0, 1)]


def test_each_setting_takes_the_decorator_then_the_command_line_then_the_environment_then_the_default(
    paced_project, tmp_path, monkeypatch
):
    monkeypatch.setenv("PEAK_FILE", str(tmp_path / "peak"))
    (paced_project / "test_pinned.py").write_text(
        "import evalsite\n\n"
        '@evalsite.cases("sets/qa.jsonl", target="paced", agents="agents", concurrency=2, timeout=7, repeat=1)\n'
        "def test_pinned(case):\n    pass\n"
    )
    (paced_project / "test_open.py").write_text(
        'import evalsite\n\n@evalsite.cases("sets/qa.jsonl", target="paced", agents="agents")\n'
        "def test_open(case):\n    pass\n"
    )
    db = tmp_path / "p.sqlite3"
    command_line = ["--evalsite-concurrency", "1", "--evalsite-timeout", "5", "--evalsite-repeat", "2"]
    monkeypatch.setenv("EVALSITE_CONCURRENCY", "3")
    monkeypatch.setenv("EVALSITE_TIMEOUT", "9")
    both = run_pytest(paced_project, "-q", "test_pinned.py", "test_open.py", *command_line, db=db)
    assert both.returncode == 0, both.stdout + both.stderr
    env_only = run_pytest(paced_project, "-q", "test_open.py", db=db)
    assert env_only.returncode == 0, env_only.stdout + env_only.stderr
    monkeypatch.delenv("EVALSITE_CONCURRENCY")
    monkeypatch.delenv("EVALSITE_TIMEOUT")
    plain = run_pytest(paced_project, "-q", "test_open.py", db=db)
    assert plain.returncode == 0, plain.stdout + plain.stderr
    # the --evalsite-set path resolves the same way (alone: no decorated test collected)
    (paced_project / "test_pinned.py").unlink()
    (paced_project / "test_open.py").unlink()
    monkeypatch.setenv("EVALSITE_CONCURRENCY", "3")
    by_option = ["--evalsite-set", "sets/qa.jsonl", "--evalsite-target", "paced", "--evalsite-agents", "agents"]
    option_env = run_pytest(paced_project, "-q", *by_option, "--evalsite-timeout", "4", db=db)
    assert option_env.returncode == 0, option_env.stdout + option_env.stderr
    assert [settings_of(c) for c in stored_configs(db)] == [
        (2, 7.0, 1),  # decorator arguments win over the command line and the environment
        (1, 5.0, 2),  # left out: the command line wins over the environment
        (3, 9.0, 1),  # no option: the environment
        (8, 60.0, 1),  # nothing: the defaults
        (3, 4.0, 1),  # --evalsite-set: the same order
    ]
    monkeypatch.setenv("EVALSITE_TIMEOUT", "soon")
    bad = run_pytest(paced_project, "-q", *by_option, db=db)
    assert bad.returncode == 4 and "$EVALSITE_TIMEOUT: not a number in ASCII digits: 'soon'" in bad.stderr
