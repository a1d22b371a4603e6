"""A new SQLite database is a copy of the migrated template of its exact migrations (issue 30)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import override_settings

from apps.evals.cli import schema_template

ROOT = Path(__file__).resolve().parents[3]
EVALSITE = Path(sys.executable).with_name("evalsite")
MIGRATIONS = ROOT / "apps" / "evals" / "migrations"


def test_the_key_follows_every_migration_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same migrations give the same key; an edited, added or removed migration file of any
    app gives another (so a stale template is never copied)."""
    package = tmp_path / "pkg" / "evals_migrations_copy"
    shutil.copytree(MIGRATIONS, package, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.syspath_prepend(str(tmp_path / "pkg"))
    with override_settings(MIGRATION_MODULES={"evals": "evals_migrations_copy"}):
        first = schema_template.schema_key()
        assert schema_template.schema_key() == first
        last = sorted(package.glob("0*.py"))[-1]
        last.write_text(last.read_text() + "\n# edited\n")
        edited = schema_template.schema_key()
        (package / "9999_added.py").write_text("# a new migration\n")
        added = schema_template.schema_key()
        (package / "9999_added.py").unlink()
        last.write_text(last.read_text().removesuffix("\n# edited\n"))
        assert schema_template.schema_key() == first
    assert len({first, edited, added}) == 3


def test_the_cache_can_be_turned_off() -> None:
    with override_settings(EVALSITE_SCHEMA_CACHE="off"):
        assert schema_template.cache_dir() is None
        assert not schema_template.copy_template("/nonexistent/x.sqlite3")


@pytest.mark.skipif(bool(os.environ.get("DATABASE_URL")), reason="SQLite files only")
def test_a_new_database_is_migrated_once_then_copied_from_the_template(tmp_path: Path) -> None:
    """The first new file is migrated and kept as the template; the next new file is that
    template (a marker table written into it shows up), and both runs store their results."""
    cache = tmp_path / "cache"
    cases = tmp_path / "c.jsonl"
    cases.write_text("".join(json.dumps({"id": f"c{i}", "input": i, "expected": i}) + "\n" for i in range(3)))
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "a.py").write_text(
        "from evalcore.discovery import target\n\n@target(id='echo', scorers=['exact_match'])\n"
        "def echo(x):\n    return x\n"
    )

    def run(db: Path) -> None:
        env = {**os.environ, "EVALSITE_DB": str(db), "EVALSITE_SCHEMA_CACHE": str(cache)}
        args = [str(EVALSITE), "eval", str(agents), "--set", str(cases), "--split", "all", "--allow-test", "--quiet"]
        out = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stdout + out.stderr

    run(tmp_path / "first.sqlite3")
    (template,) = cache.glob("*.sqlite3")
    with sqlite3.connect(template) as db:
        assert db.execute("SELECT count(*) FROM evals_evalresult").fetchone() == (0,)  # the schema, no run
        migrated = db.execute("SELECT count(*) FROM django_migrations").fetchone()
        db.execute("CREATE TABLE template_marker (x)")
    db.close()

    run(tmp_path / "second.sqlite3")
    with sqlite3.connect(tmp_path / "second.sqlite3") as db:
        assert db.execute("SELECT count(*) FROM sqlite_master WHERE name = 'template_marker'").fetchone() == (1,)
        assert db.execute("SELECT count(*) FROM django_migrations").fetchone() == migrated
        assert db.execute("SELECT count(*) FROM evals_evalresult").fetchone() == (3,)
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    db.close()
