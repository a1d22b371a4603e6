"""The project folder (issue 14 §4): data in its ``var/`` (overridable), its ``agents/`` offered
when present, its ``.env`` read by the ``evalsite`` command, and ``evalsite init`` writing one."""

from __future__ import annotations

import asyncio
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from evalcore.discovery import discover_targets
from evalcore.loaders import load_cases
from evalcore.runner import run_eval
from evalcore.store import InMemoryEvalStore
from evalsite import paths, scaffold

ROOT = Path(__file__).resolve().parents[1]


def cli(*args: str, cwd: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    """``python -m evalsite.cli ARGS`` from ``cwd``, with the checkout importable and no settings
    of this test run (``extra`` added)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EVALSITE_", "DJANGO_")) and k != "DATABASE_URL"}
    env.update(PYTHONPATH=str(ROOT), COLUMNS="120", **extra)
    return subprocess.run(
        [sys.executable, "-m", "evalsite.cli", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


# -- where things are ----------------------------------------------------------------------------


def test_the_data_folder_is_var_of_the_project_folder_unless_configured(tmp_path):
    assert paths.data_dir({}, cwd=ROOT) == ROOT / "var"  # a checkout run from its root: as before
    assert paths.data_dir({}, cwd=tmp_path) == tmp_path / "var"
    assert paths.data_dir({"EVALSITE_DATA_DIR": "/srv/evals"}, cwd=tmp_path) == Path("/srv/evals")
    assert paths.data_dir({"EVALSITE_DATA_DIR": "data"}, cwd=tmp_path) == tmp_path / "data"
    assert paths.data_dir({"EVALSITE_DATA_DIR": " "}, cwd=tmp_path) == tmp_path / "var"


def test_the_examples_come_from_the_checkout_else_from_the_installed_copy(tmp_path):
    assert paths.is_checkout() and paths.examples_dir() == ROOT / "examples"
    site = tmp_path / "site-packages"  # an installed wheel: no pyproject.toml beside the package
    (site / "evalsite_examples" / "agents").mkdir(parents=True)
    assert not paths.is_checkout(site) and paths.examples_dir(site) == site / "evalsite_examples"


def test_the_agents_folder_is_the_projects_own_else_the_examples(tmp_path):
    assert paths.agents_dir({}, cwd=tmp_path) == paths.examples_dir() / "agents"
    assert paths.agents_dir({}, cwd=ROOT) == ROOT / "examples" / "agents"  # the checkout's root has no agents/
    (tmp_path / "agents").mkdir()
    assert paths.agents_dir({}, cwd=tmp_path) == tmp_path / "agents"
    assert paths.agents_dir({"EVALSITE_AGENTS_DIR": "/x/targets"}, cwd=tmp_path) == Path("/x/targets")


def test_the_env_file_sets_what_the_environment_does_not(tmp_path):
    (tmp_path / ".env").write_text("# settings\nA=from-file\nB=from-file\nexport C='quoted value'\nEMPTY=\n")
    env = {"B": "from-env"}
    assert paths.load_env_file(env, cwd=tmp_path) == tmp_path / ".env"
    assert env == {"A": "from-file", "B": "from-env", "C": "quoted value", "EMPTY": ""}
    other = tmp_path / "other.env"
    other.write_text("D=1\n")
    env = {"EVALSITE_ENV_FILE": str(other)}
    paths.load_env_file(env, cwd=tmp_path)
    assert env["D"] == "1" and "A" not in env
    env = {"EVALSITE_ENV_FILE": ""}  # set empty: no file is read
    assert paths.load_env_file(env, cwd=tmp_path) is None and env == {"EVALSITE_ENV_FILE": ""}
    assert paths.load_env_file({}, cwd=tmp_path / "nowhere") is None  # no .env: nothing to do


def test_an_env_file_named_explicitly_but_missing_is_reported(tmp_path, capsys):
    """No .env is fine silently; EVALSITE_ENV_FILE naming a file that is not there is a warning
    (a typo would otherwise run with none of its settings, unnoticed)."""
    assert paths.load_env_file({}, cwd=tmp_path) is None
    assert capsys.readouterr().err == ""
    assert paths.load_env_file({"EVALSITE_ENV_FILE": "nope.env"}, cwd=tmp_path) is None
    assert f"EVALSITE_ENV_FILE=nope.env: no such file ({tmp_path / 'nope.env'})" in capsys.readouterr().err


# -- evalsite init ------------------------------------------------------------------------------------


def test_init_writes_a_project_and_refuses_to_overwrite_it(tmp_path, capsys):
    assert scaffold.main([str(tmp_path / "proj")]) == 0
    out = capsys.readouterr().out
    proj = tmp_path / "proj"
    written = sorted(str(p.relative_to(proj)) for p in proj.rglob("*") if p.is_file())
    assert written == [".env", ".gitignore", "README.md", "agents/calculator.py", "sets/example.jsonl"]
    assert f"cd {tmp_path / 'proj'}" in out and "evalsite eval agents --set sets/example.jsonl" in out

    (proj / "README.md").write_text("mine\n")
    (proj / "sets" / "example.jsonl").unlink()
    assert scaffold.main([str(proj)]) == 2
    err = capsys.readouterr().err
    assert "already has agents/calculator.py" in err and "README.md" in err and "--force" in err
    assert (proj / "README.md").read_text() == "mine\n" and not (proj / "sets" / "example.jsonl").exists()

    assert scaffold.main([str(proj), "--force"]) == 0
    assert (proj / "README.md").read_text() != "mine\n" and (proj / "sets" / "example.jsonl").is_file()
    (tmp_path / "file").write_text("")
    assert scaffold.main([str(tmp_path / "file")]) == 2
    assert "is a file" in capsys.readouterr().err


def test_init_in_the_current_folder_through_the_evalsite_command_writes_no_data_folder(tmp_path):
    done = cli("init", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "agents" / "calculator.py").is_file() and "cd " not in done.stdout
    assert not (tmp_path / "var").exists()


def test_the_env_template_names_only_variables_evalsite_reads():
    template = (scaffold.TEMPLATE_DIR / "env").read_text()
    names = set(re.findall(r"^# ([A-Z][A-Z0-9_]*)=", template, re.MULTILINE))
    sources = "".join(p.read_text() for d in ("evalsite", "apps", "evalcore") for p in (ROOT / d).rglob("*.py"))
    assert {"EVALSITE_DATA_DIR", "DATABASE_URL", "EVALSITE_MODEL", "EVALSITE_MODEL_BASE_URL"} <= names
    assert all(f'"{name}"' in sources for name in names - {"OPENAI_API_KEY"}), names
    assert all(line.startswith("#") or not line.strip() for line in template.splitlines())  # all commented out


def test_the_example_target_passes_its_cases_and_the_hasty_variant_fails_on_precedence():
    spec = discover_targets(scaffold.TEMPLATE_DIR / "agents").targets["calculator"]
    bank = load_cases(scaffold.TEMPLATE_DIR / "sets" / "example.jsonl")
    assert len(bank.cases) == 12 and {c.split for c in bank.cases} == {"train", "dev", "test"}
    failed = {}
    for variant in ("careful", "hasty"):
        target, label = spec.resolve(variant)
        store = InMemoryEvalStore()
        report = asyncio.run(run_eval(bank.cases, target, spec.scorers, variant=label, sink=store))
        assert (report.n, report.errored, report.metric_mean("shows_working")) == (12, 0, 1.0)
        (results,) = store.results.values()
        failed[variant] = sorted(r.case_id for r in results.values() if not r.passed)
    assert failed == {"careful": [], "hasty": ["brackets-1", "brackets-2", "prec-1", "prec-2", "prec-3"]}


@pytest.mark.skipif(bool(os.environ.get("DATABASE_URL")), reason="reads the SQLite file of the project")
def test_an_init_project_evaluates_into_the_data_folder_its_env_file_names(tmp_path):
    assert cli("init", "proj", cwd=tmp_path).returncode == 0
    proj = tmp_path / "proj"
    with (proj / ".env").open("a") as env:
        env.write("EVALSITE_DATA_DIR=store\n")
    done = cli("eval", "agents", "--set", "sets/example.jsonl", "--target", "calculator", "--quiet", cwd=proj)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not (proj / "var").exists()
    with sqlite3.connect(proj / "store" / "evalsite.sqlite3") as conn:
        assert conn.execute("select target_id, variant, n_passed from evals_evalrun").fetchall() == [
            ("calculator", "careful", 4)
        ]
    ignored = cli("eval", "agents", "--set", "sets/example.jsonl", "--quiet", cwd=proj, EVALSITE_ENV_FILE="")
    assert ignored.returncode == 0 and (proj / "var" / "evalsite.sqlite3").is_file()


def test_demo_refuses_an_only_that_matches_no_group(tmp_path):
    done = cli("demo", "--only", "nothing-like-this", cwd=tmp_path, EVALSITE_DB=str(tmp_path / "db.sqlite3"))
    assert done.returncode == 2 and "matches no demo group" in done.stderr, done.stderr


@pytest.mark.parametrize("argv", [["eval", "--db"], ["eval", "--db", ""], ["eval", "--db="], ["trace", "--db=  "]])
def test_db_without_a_path_is_refused(argv, capsys, monkeypatch):
    """``--db`` must name a file: empty, it is refused (exit 2) instead of taking the current
    folder for the database."""
    from evalsite.cli import take_db_option

    monkeypatch.setenv("EVALSITE_DB", "placeholder")  # recorded: the test's changes are undone
    monkeypatch.delenv("EVALSITE_DB")
    with pytest.raises(SystemExit) as stopped:
        take_db_option(argv)
    assert stopped.value.code == 2
    assert "--db needs a path" in capsys.readouterr().err
    assert "EVALSITE_DB" not in os.environ


def test_db_with_a_path_is_taken_out_of_the_arguments(tmp_path, monkeypatch):
    from evalsite.cli import take_db_option

    monkeypatch.setenv("EVALSITE_DB", "placeholder")  # recorded: the test's changes are undone
    monkeypatch.delenv("EVALSITE_DB")
    assert take_db_option(["eval", "--db", str(tmp_path / "a.sqlite3"), "x"]) == ["eval", "x"]
    assert os.environ["EVALSITE_DB"] == str(tmp_path / "a.sqlite3")
