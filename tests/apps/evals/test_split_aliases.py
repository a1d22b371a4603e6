"""Issue 15, split aliases: a bank named train/test/validate imports with
``--split-alias test=dev,validate=test`` (CLI, admin upload, loader) and lands in the right splits;
unknown names are still refused without an alias."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from apps.evals.models import EvalCase, EvalSet
from evalcore.loaders import CaseBankError, iter_cases, load_cases
from evalcore.splits import parse_split_aliases
from tests.support.databases import subprocess_db_env

ROOT = Path(__file__).resolve().parents[3]
EVALSITE = Path(sys.executable).with_name("evalsite")
ROWS = [
    {"id": "a", "input": "1", "split": "train"},
    {"id": "b", "input": "2", "split": "test"},
    {"id": "c", "input": "3", "split": "validate"},
    {"id": "d", "input": "4", "split": "validate"},
]
EXPECTED = {"a": "train", "b": "dev", "c": "test", "d": "test"}


def bank(tmp_path: Path, name: str = "bank.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    return path


def test_parse_split_aliases():
    assert parse_split_aliases("test=dev, validate=test") == {"test": "dev", "validate": "test"}
    assert parse_split_aliases("") == {} and parse_split_aliases(None) == {}
    for bad, words in (
        ("test", "NAME=SPLIT"),
        ("x=holdout", "is no split"),
        ("a=dev,a=test", "twice"),
        ("=dev", "NAME"),
    ):
        with pytest.raises(ValueError, match=words):
            parse_split_aliases(bad)


def test_loader_maps_names_at_once_and_still_refuses_unknown_ones(tmp_path: Path):
    path = bank(tmp_path)
    aliases = {"test": "dev", "validate": "test"}
    loaded = load_cases(path, split_aliases=aliases)
    assert {c.id: c.split for c in loaded.cases} == EXPECTED
    assert {c.id: c.split for c in iter_cases(path, split_aliases=aliases)} == EXPECTED
    csv = tmp_path / "bank.csv"
    csv.write_text("id,input,split\n" + "".join(f"{r['id']},{r['input']},{r['split']}\n" for r in ROWS))
    assert {c.id: c.split for c in load_cases(csv, split_aliases=aliases).cases} == EXPECTED
    with pytest.raises(CaseBankError, match=r"bank\.jsonl:3: field 'split': unknown split 'validate'.*--split-alias"):
        load_cases(path)
    with pytest.raises(CaseBankError, match="unknown split 'validate'"):
        load_cases(path, split_aliases={"test": "dev"})
    with pytest.raises(ValueError, match="target must be one of"):
        load_cases(path, split_aliases={"validate": "holdout"})


def run_cli(*args: str, db: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **subprocess_db_env(db)}
    return subprocess.run([str(EVALSITE), *args], cwd=ROOT, capture_output=True, text=True, env=env, timeout=120)


def test_import_cli_split_alias(tmp_path: Path):
    db = tmp_path / "alias.sqlite3"
    path = bank(tmp_path)
    refused = run_cli("import", str(path), db=db)
    assert refused.returncode == 2 and "unknown split 'validate'" in refused.stderr, refused.stderr
    bad = run_cli("import", str(path), "--split-alias", "validate", db=db)
    assert bad.returncode == 2 and "--split-alias" in bad.stderr
    done = run_cli("import", str(path), "--split-alias", "test=dev,validate=test", db=db)
    assert done.returncode == 0, done.stderr
    assert "train 1" in done.stdout and "dev 1" in done.stdout and "test 2" in done.stdout
    with sqlite3.connect(db) as conn:
        (recorded,) = conn.execute("SELECT split_aliases FROM evals_evalset").fetchone()
    assert json.loads(recorded) == {"test": "dev", "validate": "test"}


@pytest.mark.django_db
def test_admin_upload_split_aliases(client, staff, tmp_path: Path):
    client.force_login(staff)
    body = bank(tmp_path).read_bytes()
    url = reverse("admin:evals_evalset_upload")
    form = {"name": "aliased", "split_ratios": "60/20/20"}
    refused = client.post(url, {**form, "file": SimpleUploadedFile("bank.jsonl", body)})
    assert refused.status_code == 400 and b"unknown split" in refused.content
    assert not EvalSet.objects.filter(name="aliased").exists()
    bad = client.post(url, {**form, "file": SimpleUploadedFile("bank.jsonl", body), "split_aliases": "x=holdout"})
    assert bad.status_code == 400 and b"is no split" in bad.content
    done = client.post(
        url, {**form, "file": SimpleUploadedFile("bank.jsonl", body), "split_aliases": "test=dev,validate=test"}
    )
    assert done.status_code == 302
    stored = dict(EvalCase.objects.filter(eval_set__name="aliased").values_list("case_id", "split"))
    assert stored == EXPECTED
    # the set records how its file's split names were read, shown in the admin and the API
    assert EvalSet.objects.get(name="aliased").split_aliases == {"test": "dev", "validate": "test"}
    change = client.get(reverse("admin:evals_evalset_change", args=[EvalSet.objects.get(name="aliased").pk]))
    assert b"validate" in change.content
    listed = {s["name"]: s for s in client.get("/api/eval/sets").json()["items"]}
    assert listed["aliased"]["split_aliases"] == {"test": "dev", "validate": "test"}
    page = client.get(reverse("evals:set", args=[EvalSet.objects.get(name="aliased").pk])).content.decode()
    assert "split names read as" in page and "validate</span>&rarr;test" in page
