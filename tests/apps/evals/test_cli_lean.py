"""The command-line tools load no web stack: ``evalsite eval`` never imports daphne, Twisted or
the API (django-ninja); ``serve`` starts daphne itself and ``runserver`` keeps daphne's app."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.databases import subprocess_db_env

ROOT = Path(__file__).resolve().parents[3]
EVALSITE = Path(sys.executable).with_name("evalsite")
WEB_STACK = ("daphne", "twisted", "autobahn", "ninja", "apps.evals.api.runs", "evalsite.api")
# loaded only when asked for: the OTLP export (EVALSITE_OTLP_ENDPOINT), the export formats and
# the figures of the portal's pages (numpy), the .env reader (a .env file), PyYAML (a promptfoo YAML file)
ON_DEMAND = ("opentelemetry", "numpy", "apps.evals.exports.downloads", "apps.evals.exports.otel", "dotenv", "yaml")
# what a plain one-case run never needs, so its start-up never loads it (issue 30 floor 3): the
# playground's services and case capture (the playground's example source imports them on its
# first question), the queue's code (--executor queue), the baseline comparison (--baseline),
# Django's migration loader (a migrated database is told by its django_migrations rows), the
# progress bar (--quiet), the resume's and the workers' target loading, rich's emoji table and
# the report writers with the XML library (no --json, no --junit)
NOT_AT_START_UP = (
    "apps.evals.sets.capture",
    "apps.agents.services",
    "apps.evals.cli.queued",
    "apps.evals.worker.queue",
    "apps.evals.queries.compare",
    "apps.evals.queries.search",
    "evalcore.baseline",
    "evalcore.slices",
    "django.db.migrations.loader",
    "django.db.migrations.recorder",
    "rich.progress",
    "rich._emoji_codes",
    "evalcore.report_files",
    "xml.etree.ElementTree",
    "apps.evals.runs.resume",
    "apps.agents.registry",
)

AGENT = """
import atexit, json, os, sys

from evalcore.discovery import target


@atexit.register
def _modules_at_exit():  # what the whole command loaded, its tables and reports included
    with open(os.environ["PEEK_OUT"] + ".exit", "w") as f:
        json.dump(sorted(m for m in sys.modules), f)


@target(id="peek", scorers=["exact_match"])
def peek(x):
    with open(os.environ["PEEK_OUT"], "w") as f:
        json.dump(sorted(m for m in sys.modules), f)
    return x
"""


def test_evalsite_eval_imports_no_web_stack(tmp_path: Path) -> None:
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "peek.py").write_text(AGENT)
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps({"id": "c1", "input": 1, "expected": 1, "split": "dev"}) + "\n")
    out = tmp_path / "modules.json"
    env = {**os.environ, **subprocess_db_env(tmp_path / "db.sqlite3"), "PEEK_OUT": str(out)}
    env.pop("EVALSITE_OTLP_ENDPOINT", None)
    done = subprocess.run(
        [str(EVALSITE), "eval", str(agents), "--set", str(cases), "--quiet"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    modules = json.loads(out.read_text())
    loaded = [m for m in modules if m.split(".")[0] in WEB_STACK or m in WEB_STACK]
    assert loaded == []
    on_demand = [m for m in modules if m.split(".")[0] in ON_DEMAND or m in ON_DEMAND]
    assert on_demand == []
    assert "apps.evals.results.writer" in modules  # the check saw the eval process itself
    at_exit = set(json.loads(Path(f"{out}.exit").read_text()))
    assert "rich.table" in at_exit  # the check saw the end of the command (its printed table)
    never = set(NOT_AT_START_UP)
    if "DATABASE_URL" in env:  # a new PostgreSQL database is migrated by this run (no template copy)
        never -= {"django.db.migrations.loader", "django.db.migrations.recorder"}
    assert sorted(at_exit & never) == []


def test_runserver_keeps_daphnes_app_and_other_commands_do_not_load_it() -> None:
    code = "from django.conf import settings; print('daphne' in settings.INSTALLED_APPS)"
    seen = {}
    for command in ("runserver", "eval", "serve"):
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": "evalsite.settings", "EVALSITE_COMMAND": command}
        done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, env=env)
        assert done.returncode == 0, done.stderr
        seen[command] = done.stdout.strip()
    assert seen == {"runserver": "True", "eval": "False", "serve": "False"}
