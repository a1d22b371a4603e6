"""promptfoo files read as promptfoo reads them: rendered assertion values, CSV columns, scenarios,
``defaultTest`` merging and the var expansion rule (promptfoo's ``src/csv.ts``, ``evaluator.ts``,
``assertions/index.ts`` are the reference; the files are written by each test)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from evalcore.loaders import CaseBankError, load_cases


def test_assertion_values_are_rendered_with_each_combination_of_vars(tmp_path: Path) -> None:
    config = tmp_path / "promptfooconfig.yaml"
    config.write_text(
        "tests:\n"
        "  - vars:\n"
        "      topic: [photosynthesis, gravity]\n"
        "      meta: {unit: cm}\n"
        "    assert:\n"
        "      - type: llm-rubric\n"
        "        value: Does this describe {{topic}} accurately?\n"
        "      - type: equals\n"
        "        value: '{{ topic }} in {{ meta.unit }}'\n"
        "      - type: icontains-any\n"
        "        value: ['{{topic}}', plain]\n"
    )
    first, second = load_cases(config).cases
    assert first.input["topic"] == "photosynthesis" and second.input["topic"] == "gravity"
    assert first.metadata["scorers"][0] == {
        "name": "rubric_judge",
        "args": {"rubric": "Does this describe photosynthesis accurately?"},
    }
    assert second.metadata["scorers"][0]["args"]["rubric"] == "Does this describe gravity accurately?"
    assert (first.expected, second.expected) == ("photosynthesis in cm", "gravity in cm")
    assert second.metadata["scorers"][2]["args"]["value"] == ["gravity", "plain"]
    # what the case keeps of promptfoo's test is what was checked
    assert second.metadata["promptfoo"]["assert"][0]["value"] == "Does this describe gravity accurately?"


def test_a_template_beyond_var_lookups_is_reported_not_checked_half_rendered(tmp_path: Path) -> None:
    config = tmp_path / "promptfooconfig.yaml"
    config.write_text(
        "tests:\n"
        "  - vars: {topic: tides}\n"
        "    assert:\n"
        "      - type: llm-rubric\n"
        "        value: 'Mentions {{ topic | upper }}'\n"
        "      - type: contains\n"
        "        value: '{{topic}}'\n"
    )
    bank = load_cases(config)
    (case,) = bank.cases
    assert case.metadata["scorers"] == [{"name": "contains", "args": {"value": "tides", "casefold": False}}]
    assert case.metadata["unscored_assertions"] == ["llm-rubric (Nunjucks beyond {{ var }})"]
    assert any("Nunjucks beyond" in warning for warning in bank.warnings)


def test_a_template_beyond_var_lookups_keeps_its_assertion_as_written_in_metadata(tmp_path: Path) -> None:
    config = tmp_path / "promptfooconfig.yaml"
    config.write_text(
        "tests:\n"
        "  - vars: {name: ada}\n"
        "    assert:\n"
        "      - type: contains\n"
        "        value: '{{ name | upper }}'\n"
        "      - type: equals\n"
        "        value: '{{name}}'\n"
    )
    (case,) = load_cases(config).cases
    assert case.metadata["promptfoo"]["assert"] == [
        {"type": "contains", "value": "{{ name | upper }}"},
        {"type": "equals", "value": "ada"},
    ]
    assert case.metadata["unscored_assertions"] == ["contains (Nunjucks beyond {{ var }})"]


def test_an_undefined_var_in_an_assertion_is_reported_and_left_unscored_not_rendered_empty(tmp_path: Path) -> None:
    config = tmp_path / "promptfooconfig.yaml"
    config.write_text(
        "tests:\n"
        "  - vars: {topic: tides}\n"
        "    assert:\n"
        "      - type: contains\n"
        "        value: '{{topic}}'\n"
        "  - vars: {topic: [moon, sun], meta: {unit: cm}}\n"
        "    assert:\n"
        "      - type: icontains\n"
        "        value: '{{topic}}'\n"
        "      - type: contains\n"
        "        value: '{{ missing }}'\n"
        "      - type: contains-any\n"
        "        value: ['{{ meta.size }}', plain]\n"
    )
    bank = load_cases(config)
    first, moon, sun = bank.cases
    assert first.metadata["scorers"] == [{"name": "contains", "args": {"value": "tides", "casefold": False}}]
    assert "unscored_assertions" not in first.metadata
    for case, topic in ((moon, "moon"), (sun, "sun")):
        # no scorer gets an empty needle: only the assertion whose vars exist is scored
        assert case.metadata["scorers"] == [{"name": "contains", "args": {"value": topic, "casefold": True}}]
        assert case.metadata["unscored_assertions"] == [
            "contains ({{ missing }} is not one of the test's vars)",
            "contains-any ({{ meta.size }} is not one of the test's vars)",
        ]
        # the assertions are kept, as written
        assert case.metadata["promptfoo"]["assert"][1:] == [
            {"type": "contains", "value": "{{ missing }}"},
            {"type": "contains-any", "value": ["{{ meta.size }}", "plain"]},
        ]
    undefined = [w for w in bank.warnings if "is not one of the test's vars" in w]
    assert len(undefined) == 2  # one per assertion, not one per combination of vars
    assert "promptfooconfig.yaml:6: test 1, assert[1] (contains: '{{ missing }}'): {{ missing }}" in undefined[0]
    assert "test 1, assert[2]" in undefined[1] and "{{ meta.size }}" in undefined[1]
    assert not any("no Evalsite equivalent" in w for w in bank.warnings)


def test_a_var_set_to_null_is_defined_and_renders_as_nothing(tmp_path: Path) -> None:
    config = tmp_path / "promptfooconfig.yaml"
    config.write_text(
        "tests:\n"
        "  - vars: {topic: tides, note: null}\n"
        "    assert:\n"
        "      - type: contains\n"
        "        value: '{{topic}}{{ note }}'\n"
    )
    (case,) = load_cases(config).cases
    assert case.metadata["scorers"] == [{"name": "contains", "args": {"value": "tides", "casefold": False}}]


def test_csv_columns_follow_promptfoo_escaped_commas_empty_cells_and_config_thresholds(tmp_path: Path) -> None:
    tests = tmp_path / "tests.csv"
    tests.write_text(
        "question,__expected1,__expected2,__metadata:tags[],__metadata:owner,__config:__expected2:threshold\n"
        'q1,contains:{{question}},,"a\\,b, c ,d\\,e\\,f",,\n'
        "q2,  icontains:x  ,similar:hello,,team,0.9\n"
    )
    one, two = load_cases(tests).cases
    assert one.metadata["tags"] == ["a,b", "c", "d,e,f"]  # the backslash undoes the comma, and is gone
    assert "owner" not in one.metadata  # an empty metadata cell is no metadata
    # an empty __expected cell is no assertion; a filled one is read trimmed, rendered with the row's vars
    assert one.metadata["scorers"] == [{"name": "contains", "args": {"value": "q1", "casefold": False}}]
    assert two.metadata["scorers"] == [{"name": "contains", "args": {"value": "x", "casefold": True}}]
    assert two.metadata["owner"] == "team" and "tags" not in two.metadata
    assert two.metadata["promptfoo"]["assert"][1] == {"type": "similar", "value": "hello", "threshold": 0.9}


def test_default_test_merges_options_metadata_and_threshold_and_may_be_a_file(tmp_path: Path) -> None:
    (tmp_path / "default.yaml").write_text(
        "vars: {lang: en}\noptions: {prefix: '>> ', suffix: ' <<'}\nmetadata: {team: qa, tier: 1}\n"
        "threshold: 0.5\nassert:\n  - type: contains\n    value: '{{lang}}'\n"
    )
    config = tmp_path / "promptfooconfig.yaml"
    config.write_text(
        "defaultTest: file://default.yaml\n"
        "tests:\n"
        "  - vars: {q: hi}\n"
        "    options: {suffix: ' !!'}\n"
        "    metadata: {tier: 2}\n"
        "  - vars: {q: bye, lang: fr}\n"
        "    threshold: 0.8\n"
    )
    first, second = load_cases(config).cases
    assert first.input == {"lang": "en", "q": "hi"}
    assert first.metadata["promptfoo"]["options"] == {"prefix": ">> ", "suffix": " !!"}
    assert (first.metadata["team"], first.metadata["tier"]) == ("qa", 2)
    assert first.metadata["promptfoo"]["threshold"] == 0.5 and second.metadata["promptfoo"]["threshold"] == 0.8
    # defaultTest's assertion is rendered with each test's own vars
    assert first.metadata["scorers"][0]["args"]["value"] == "en"
    assert second.metadata["scorers"][0]["args"]["value"] == "fr"


def test_scenarios_cross_each_config_entry_with_each_test(tmp_path: Path) -> None:
    config = tmp_path / "promptfooconfig.yaml"
    config.write_text(
        "defaultTest:\n  vars: {tone: plain}\n"
        "scenarios:\n"
        "  - config:\n"
        "      - vars: {language: French, hello: Bonjour}\n"
        "      - vars: {language: German, hello: Hallo}\n"
        "    tests:\n"
        "      - description: greet\n"
        "        vars: {input: Hello}\n"
        "        assert:\n"
        "          - type: icontains\n"
        "            value: '{{hello}}'\n"
        "      - vars: {input: Bye, tone: warm}\n"
    )
    cases = load_cases(config).cases
    assert [(c.input["language"], c.input["input"], c.input["tone"]) for c in cases] == [
        ("French", "Hello", "plain"),
        ("French", "Bye", "warm"),
        ("German", "Hello", "plain"),
        ("German", "Bye", "warm"),
    ]
    assert cases[2].metadata["scorers"] == [{"name": "contains", "args": {"value": "Hallo", "casefold": True}}]
    assert cases[0].metadata["promptfoo"]["description"] == "greet"


def test_only_lists_of_text_expand_and_expansion_can_be_turned_off(tmp_path: Path) -> None:
    config = tmp_path / "promptfooconfig.yaml"
    config.write_text(
        "tests:\n"
        "  - vars: {q: [a, b], numbers: [1, 2, 3], empty: []}\n"
        "  - vars: {q: [c, d]}\n"
        "    options: {disableVarExpansion: true}\n"
    )
    cases = load_cases(config).cases
    assert [case.input for case in cases] == [
        {"q": "a", "numbers": [1, 2, 3], "empty": []},
        {"q": "b", "numbers": [1, 2, 3], "empty": []},
        {"q": ["c", "d"]},
    ]


def test_a_test_may_leave_out_the_default_assertions(tmp_path: Path) -> None:
    config = tmp_path / "promptfooconfig.yaml"
    config.write_text(
        "defaultTest:\n  assert:\n    - type: contains\n      value: always\n"
        "tests:\n"
        "  - vars: {q: a}\n"
        "  - vars: {q: b}\n"
        "    options: {disableDefaultAsserts: true}\n"
        "    assert:\n      - type: contains\n        value: own\n"
    )
    first, second = load_cases(config).cases
    assert [s["args"]["value"] for s in first.metadata["scorers"]] == ["always"]
    assert [s["args"]["value"] for s in second.metadata["scorers"]] == ["own"]


def test_a_json_config_reads_as_its_yaml_would(tmp_path: Path) -> None:
    folder = tmp_path / "greetings"
    folder.mkdir()
    config = {
        "prompts": ["Say {{q}}"],
        "defaultTest": {"vars": {"lang": "en"}},
        "tests": [{"vars": {"q": ["hi", "bye"]}, "assert": [{"type": "icontains", "value": "{{q}}"}]}],
    }
    (folder / "promptfooconfig.json").write_text(json.dumps(config))
    bank = load_cases(folder / "promptfooconfig.json")
    assert (bank.dialect, bank.name) == ("promptfoo", "greetings")
    assert [c.input for c in bank.cases] == [{"lang": "en", "q": "hi"}, {"lang": "en", "q": "bye"}]
    assert bank.cases[1].metadata["scorers"] == [{"name": "contains", "args": {"value": "bye", "casefold": True}}]


def test_file_vars_are_read_and_globs_expand_as_promptfoo_renders_them(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Alpha text.\n")
    (docs / "b.txt").write_text("Beta text.\n")
    (tmp_path / "profile.yaml").write_text("name: Ada\nlangs: [en, fr]\n")
    (tmp_path / "tool.py").write_text("def get_var(*args): ...\n")
    config = tmp_path / "promptfooconfig.yaml"
    config.write_text(
        "tests:\n"
        "  - vars:\n"
        "      doc: file://docs/*.txt\n"
        "      profile: file://profile.yaml\n"
        "      greeting: 'Dear {{who}}'\n"
        "      who: reader\n"
        "    assert:\n"
        "      - type: contains\n"
        "        value: '{{doc}}'\n"
        "  - vars: {computed: file://tool.py}\n"
    )
    bank = load_cases(config)
    alpha, beta, computed = bank.cases
    assert alpha.input["doc"] == "Alpha text." and beta.input["doc"] == "Beta text."
    assert alpha.input["profile"] == '{"name":"Ada","langs":["en","fr"]}'  # JSON text, as promptfoo passes it
    assert alpha.input["greeting"] == "Dear reader"  # a var naming another is filled in
    assert beta.metadata["scorers"] == [{"name": "contains", "args": {"value": "Beta text.", "casefold": False}}]
    assert computed.input == {"computed": "file://tool.py"}  # no code from a case file is run: kept, and said so
    assert any("'computed' is file://tool.py" in warning for warning in bank.warnings)


def test_an_uploaded_config_cannot_read_var_files_from_the_server() -> None:
    upload = io.BytesIO(b"tests:\n  - vars: {secret: file:///etc/passwd}\n")
    with pytest.raises(CaseBankError) as info:
        load_cases(upload, name="promptfooconfig.yaml")
    assert info.value.field == "vars.secret" and "cannot name other files" in str(info.value)


def test_tests_made_by_running_code_are_refused_by_name(tmp_path: Path) -> None:
    config = tmp_path / "promptfooconfig.yaml"
    config.write_text("tests:\n  - path: file://make_tests.py:generate\n    config: {n: 3}\n")
    with pytest.raises(CaseBankError, match=r":2: field 'tests': a test generator \('file://make_tests.py:generate'\)"):
        load_cases(config)
    (tmp_path / "tests.py").write_text("")
    config.write_text("tests: file://tests.py\n")
    with pytest.raises(CaseBankError, match=r"promptfoo tests are read from .csv, .json, .jsonl, .yaml files"):
        load_cases(config)


def test_transform_vars_is_not_run_and_said_once(tmp_path: Path) -> None:
    config = tmp_path / "promptfooconfig.yaml"
    config.write_text(
        "defaultTest:\n  options: {transformVars: '{ ...vars, q: vars.q.toUpperCase() }'}\n"
        "tests:\n  - vars: {q: a}\n  - vars: {q: b}\n"
    )
    bank = load_cases(config)
    assert [c.input for c in bank.cases] == ["a", "b"]
    assert sum("transformVars" in warning for warning in bank.warnings) == 1
