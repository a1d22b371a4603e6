"""`evalsite import FILE` for every peer format: the cases stored, the layout named, the warnings printed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.evals.models import EvalCase, EvalSet
from tests.support.databases import subprocess_db_env
from tests.support.realdata import REALDATA

ROOT = Path(__file__).resolve().parents[3]
PEERS = ROOT / "examples" / "peers"
EVALSITE = Path(sys.executable).with_name("evalsite")

FILES = [
    # (file, extra args, set name, cases, layout named in the output)
    (PEERS / "promptfoo/simple-test/promptfooconfig.yaml", [], "simple-test", 5, "promptfoo"),
    (PEERS / "promptfoo/csv-tests/promptfooconfig.yaml", [], "csv-tests", 4, "promptfoo"),
    (PEERS / "promptfoo/csv-tests/tests.csv", [], "tests", 4, "promptfoo"),
    (PEERS / "inspect/security_guide.jsonl", [], "security_guide", 16, "inspect"),
    (PEERS / "inspect/samples-mcq.csv", [], "samples-mcq", 1, "inspect"),
    (PEERS / "openai_evals/test_match.jsonl", [], "test_match", 3, "openai_evals"),
    (PEERS / "langfuse/dataset-items.json", [], "dataset-items", 3, "langfuse"),
    (PEERS / "huggingface/biology_qa.parquet", ["--map", "input=question,expected=answer"], "biology_qa", 20, None),
]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("path", "args", "name", "count", "layout"), FILES, ids=lambda v: getattr(v, "name", None))
def test_import_reads_each_peer_format(
    path: Path, args: list[str], name: str, count: int, layout: str | None, capsys: pytest.CaptureFixture[str]
) -> None:
    call_command("import", str(path), *args)
    out = capsys.readouterr().out
    assert f"-> set {name!r}: {count} new" in out
    assert (f"(read as {layout})" in out) == (layout is not None)
    assert EvalCase.objects.filter(eval_set__name=name).count() == count
    call_command("import", str(path), *args)  # stable ids: a re-import changes nothing
    assert f"0 new, 0 updated, {count} unchanged" in capsys.readouterr().out


@pytest.mark.django_db(transaction=True)
def test_promptfoo_import_prints_the_unscored_assertions_and_stores_the_specs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    call_command("import", str(PEERS / "promptfoo/simple-test/promptfooconfig.yaml"))
    err = capsys.readouterr().err
    for kind in ("javascript", "python", "similar"):
        assert f"warning: 1 '{kind}' assertion(s) have no Evalsite equivalent" in err
    judged = EvalCase.objects.get(eval_set__name="simple-test", input="The quick brown fox jumps over the lazy dog")
    assert [spec["name"] for spec in judged.metadata["scorers"]] == ["rubric_judge", "contains"]


@pytest.mark.django_db(transaction=True)
def test_a_bad_peer_file_imports_nothing_and_names_the_place(tmp_path: Path) -> None:
    bad = tmp_path / "promptfooconfig.yaml"
    bad.write_text("tests:\n  - vars: {q: hi}\n  - vars: {q: there}\n    assert: not-a-list\n")
    with pytest.raises(CommandError) as error:
        call_command("import", str(bad))
    assert f"{bad}:3: field 'assert': 'assert' must be a list of assertions" in str(error.value)
    inspect = tmp_path / "inspect.jsonl"
    inspect.write_text('{"input": "a", "target": "b"}\n{"input": "c", "target": "d", "metadata": "{oops"}\n')
    with pytest.raises(CommandError, match=r"inspect.jsonl:2: field 'metadata'"):
        call_command("import", str(inspect))
    assert not EvalSet.objects.exists()


@pytest.mark.skipif(not REALDATA.is_dir(), reason=f"no real peer data at {REALDATA}")
def test_the_console_script_imports_the_real_peer_files(tmp_path: Path) -> None:
    files = [
        REALDATA / "promptfoo" / "getting-started__promptfooconfig.yaml",
        REALDATA / "promptfoo" / "simple-test__tests.csv",
        REALDATA / "promptfoo" / "jsonl-test-cases__cases.jsonl",
        REALDATA / "inspect_ai" / "test_dataset__samples-md.jsonl",
        REALDATA / "inspect_ai" / "langchain__dataset.json",
        REALDATA / "openai_evals" / "logic_samples__from_README.jsonl",
    ]
    env = {**os.environ, **subprocess_db_env(tmp_path / "peers.sqlite3")}
    result = subprocess.run(
        [str(EVALSITE), "import", *map(str, files)], cwd=ROOT, capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert [line.split(" -> ")[1].split(":")[0] for line in lines if " -> " in line] == [
        "set 'getting-started__promptfooconfig'",
        "set 'simple-test__tests'",
        "set 'jsonl-test-cases__cases'",
        "set 'test_dataset__samples-md'",
        "set 'langchain__dataset'",
        "set 'logic_samples__from_README'",
    ]
    assert "2 'javascript' assertion(s)" in result.stderr
    duplicate = subprocess.run(
        [str(EVALSITE), "import", str(REALDATA / "inspect_ai" / "_examples__bias_detection.jsonl")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert duplicate.returncode == 2 and "_examples__bias_detection.jsonl:45: field 'id'" in duplicate.stderr
