"""Issue 15 end to end: the rules-demo example through `evalsite eval` on its scripted model, and
`evalsite targets` listing rules. The presence check alone tells the two variants apart."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from evalcore.rules import rule_aggregates, rule_flips
from tests.support.databases import subprocess_db_env

ROOT = Path(__file__).resolve().parents[3]
EVALSITE = Path(sys.executable).with_name("evalsite")
AGENTS = ROOT / "examples" / "agents"
SET = ROOT / "examples" / "sets" / "rules_demo.jsonl"


def run_cli(*args: str, db: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **subprocess_db_env(db), "COLUMNS": "200"}
    for name in ("EVALSITE_MODEL", "EVALSITE_JUDGE_MODEL"):  # the example's offline model, no judge
        env.pop(name, None)
    return subprocess.run([str(EVALSITE), *args], cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)


def rule_scores(report: Path) -> dict[str, dict]:
    document = json.loads(report.read_text())
    found = {}
    for case in document["cases"]:
        for score in case["scores"]:
            if score["name"] == "rule_adherence":
                found[case["case_id"]] = score
    return found


def test_example_variants_differ_on_r2_by_presence_alone(tmp_path: Path):
    db = tmp_path / "rules.sqlite3"
    reports = {}
    for variant in ("full", "lean"):
        report = tmp_path / f"{variant}.json"
        done = run_cli(
            "eval", str(AGENTS), "--set", str(SET), "--target", "rules-demo", "--variant", variant,
            "--json", str(report), "--quiet", db=db,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        reports[variant] = rule_scores(report)
    full, lean = reports["full"], reports["lean"]
    assert set(full) == set(lean) == {"pricing-followup", "pricing-third-turn", "pricing-first-turn", "order-status"}

    def outcome(scores: dict, case_id: str, rule_id: str) -> str:
        return next(r["outcome"] for r in scores[case_id]["metadata"]["rules"] if r["id"] == rule_id)

    # the rules came from the target (R1, R2) and from rules.toml (R3)
    assert [r["id"] for r in lean["order-status"]["metadata"]["rules"]] == ["R1", "R2", "R3"]
    for case_id in ("pricing-followup", "pricing-third-turn", "order-status"):
        assert outcome(lean, case_id, "R2") == "rule_absent"
        assert outcome(full, case_id, "R2") == "unjudged"  # present; no judge: never "honoured" by default
        assert lean[case_id]["passed"] is False and full[case_id]["passed"] is None
    third = next(r for r in lean["pricing-third-turn"]["metadata"]["rules"] if r["id"] == "R2")
    assert (third["presence"], third["turns"], third["n_turns"], third["dropped_after"]) == ("dropped", [1], 3, 1)
    # a one-turn conversation never reaches the follow-up template: R2 is there in both variants
    assert outcome(lean, "pricing-first-turn", "R2") == outcome(full, "pricing-first-turn", "R2") == "unjudged"
    for scores in (full, lean):
        assert {outcome(scores, c, r) for c in scores for r in ("R1", "R3")} == {"unjudged"}

    r2 = {a.rule_id: a for a in rule_aggregates(lean.values())}["R2"]
    assert (r2.coverage, r2.absent_rate, r2.dropped) == ("3/4", 1.0, 3)
    flips = rule_flips(full, lean)
    assert {(f.case_key, f.rule_id, f.label) for f in flips} == {
        (c, "R2", "unjudged → rule_absent") for c in ("pricing-followup", "pricing-third-turn", "order-status")
    }


def test_targets_lists_rules_from_the_target_and_the_rules_file(tmp_path: Path):
    done = run_cli("targets", str(AGENTS), db=tmp_path / "t.sqlite3")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "rule rules-demo R1: Always answer in English." in done.stdout
    assert "rule rules-demo R2: Never quote a price in {currency}; point the customer" in done.stdout
    assert "rule rules-demo R3: Sign every reply as Ada from Support." in done.stdout


def test_targets_names_a_broken_rules_file(tmp_path: Path):
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "bot.py").write_text(
        "from evalcore.discovery import TargetSpec\nbot = TargetSpec(id='bot', target=lambda q: q)\n"
    )
    (folder / "rules.toml").write_text("[bot]\nR1 = 3\n")
    done = run_cli("targets", str(folder), db=tmp_path / "t.sqlite3")
    assert "problem" in done.stdout and "rules.toml: bot.R1.text" in done.stdout, done.stdout


async def test_example_with_a_scripted_judge_r2_honoured_in_full_absent_in_lean(monkeypatch):
    import json as _json

    from evalcore.discovery import discover_targets
    from evalcore.loaders import load_cases
    from evalcore.rules import bind_target_rules, target_rules
    from evalcore.runner import run_eval
    from evalcore.runtime.scripted import FunctionModel
    from evalcore.scorer_registry import resolve_scorers
    from evalcore.scorers import ScorerServices

    monkeypatch.delenv("EVALSITE_MODEL", raising=False)
    spec = discover_targets(AGENTS).targets["rules-demo"]
    cases = load_cases(SET).cases
    judge = FunctionModel(lambda m: _json.dumps({"verdict": "honoured", "reason": "complies"}), name="judge")
    outcomes = {}
    for variant in ("full", "lean"):

        class Sink:
            def __init__(self):
                self.results = []

            def on_event(self, event):
                pass

            def on_result(self, result):
                self.results.append(result)

            def flush(self):
                pass

        sink = Sink()
        target, label = spec.resolve(variant)
        scorers = bind_target_rules(resolve_scorers(spec.scorers), target_rules(spec.id, spec.rules, AGENTS))
        await run_eval(cases, target, scorers, variant=label, services=ScorerServices(judge=judge), sink=sink)
        outcomes[variant] = {
            r.case.id: {row["id"]: row["outcome"] for row in r.scores[0].metadata["rules"]} for r in sink.results
        }
    assert outcomes["full"]["pricing-followup"] == {"R1": "honoured", "R2": "honoured", "R3": "honoured"}
    assert outcomes["lean"]["pricing-followup"] == {"R1": "honoured", "R2": "rule_absent", "R3": "honoured"}


def test_eval_refuses_a_broken_rules_file_naming_it(tmp_path: Path):
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "bot.py").write_text(
        "from evalcore.discovery import TargetSpec\n"
        "bot = TargetSpec(id='bot', target=lambda q: q, scorers=['rule_adherence'])\n"
    )
    (folder / "rules.toml").write_text('[bot]\n"R 1" = "text"\n')
    bank = tmp_path / "bank.jsonl"
    bank.write_text('{"id": "q1", "input": "hi", "split": "dev"}\n')
    done = run_cli("eval", str(folder), "--set", str(bank), "--quiet", db=tmp_path / "e.sqlite3")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "rules.toml: bot.R 1.id" in done.stderr
