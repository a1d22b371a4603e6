"""Issue 15 in the portal: per-rule aggregates on the run page and in the API, per-rule flips on
the compare page and in the API, each rule's outcome on the case page.

The runs are real: the rules-demo example (``examples/agents/rules_demo.py``) runs on its
offline model through ``prepare_eval_run`` (which binds the target's rules, R3 from
``rules.toml``) and ``execute_eval_run`` into the test database; the judge is a scripted model.
Variant ``lean`` drops R2 from its template after turn 1, so R2 is ``rule_absent`` on the three
multi-turn cases; ``full`` keeps it, and the judge finds it honoured.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse

from apps.evals.models import EvalResult, EvalRun
from apps.evals.runs.execution import execute_eval_run
from apps.evals.runs.prepare import prepare_eval_run
from apps.evals.sets.cases import import_cases
from evalcore.discovery import discover_targets
from evalcore.loaders import load_cases
from evalcore.runtime.scripted import FunctionModel
from evalcore.scorers.base import ScorerServices
from tests.apps.factories import make_eval_run

ROOT = Path(__file__).resolve().parents[3]
AGENTS = ROOT / "examples" / "agents"
SET = ROOT / "examples" / "sets" / "rules_demo.jsonl"
MULTI_TURN = ("order-status", "pricing-followup", "pricing-third-turn")

pytestmark = pytest.mark.django_db(transaction=True)


def honouring_judge() -> FunctionModel:
    return FunctionModel(lambda messages: json.dumps({"verdict": "honoured", "reason": "complies"}), name="judge")


@pytest.fixture
def rule_runs(monkeypatch) -> dict[str, EvalRun]:
    """Three finished runs of the rules-demo set: full and lean with a scripted judge, lean without one."""
    monkeypatch.delenv("EVALSITE_MODEL", raising=False)
    spec = discover_targets(AGENTS).targets["rules-demo"]
    bank = load_cases(SET)
    eval_set = import_cases(name=bank.name, cases=bank.cases, content_hash=bank.content_hash).eval_set
    runs = {}
    for name, variant, judge in (
        ("full", "full", honouring_judge()),
        ("lean", "lean", honouring_judge()),
        ("lean_unjudged", "lean", None),
    ):
        eval_run = prepare_eval_run(eval_set=eval_set, spec=spec, variant=variant, split="dev", allow_test=False)
        execute_eval_run(eval_run, spec, services=ScorerServices(judge=judge))
        eval_run.refresh_from_db()
        assert eval_run.status == "finished" and eval_run.n_done == 4, eval_run.error
        runs[name] = eval_run
    return runs


def rule_row(body: str, section_id: str, rule_id: str) -> list[str]:
    """The cells (tags stripped) of a rule's row in one section of a page."""
    section = re.search(rf'<section id="{section_id}">.*?</section>', body, re.S)
    assert section, f"no section {section_id}"
    row = re.search(rf'<tr data-rule="{rule_id}"[^>]*>(.*?)</tr>', section.group(0), re.S)
    assert row, f"no row for {rule_id} in {section_id}"
    return [re.sub(r"<[^>]+>", "", cell).strip() for cell in re.findall(r"<td[^>]*>(.*?)</td>", row.group(1), re.S)]


def get_body(client: Any, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    return response.content.decode()


def test_run_page_shows_per_rule_aggregates_lean_r2_absent_full_honoured(client, viewer, rule_runs):
    client.force_login(viewer)
    for name in ("full", "lean"):
        page = get_body(client, reverse("evals:eval_run", args=[rule_runs[name].pk]))
        rules_url = reverse("evals:eval_run_rules", args=[rule_runs[name].pk])
        assert f'hx-get="{rules_url}"' in page  # the block loads after the page
    lean = get_body(client, reverse("evals:eval_run_rules", args=[rule_runs["lean"].pk]))
    # rule, text, honoured, ignored, absent, not applicable, n, undecided, dropped
    assert rule_row(lean, "run-rules", "R2")[2:] == ["25.0%", "0.0%", "75.0%", "0.0%", "n=4/4", "—", "3"]
    assert rule_row(lean, "run-rules", "R3")[:3] == ["R3", "Sign every reply as Ada from Support.", "100.0%"]
    full = get_body(client, reverse("evals:eval_run_rules", args=[rule_runs["full"].pk]))
    for rule_id in ("R1", "R2", "R3"):
        assert rule_row(full, "run-rules", rule_id)[2:] == ["100.0%", "0.0%", "0.0%", "0.0%", "n=4/4", "—", "0"]
    # without a judge, the present R2 (one-turn case) is undecided: coverage 3 of 4, never "honoured"
    unjudged = get_body(client, reverse("evals:eval_run_rules", args=[rule_runs["lean_unjudged"].pk]))
    assert rule_row(unjudged, "run-rules", "R2")[2:] == ["0.0%", "0.0%", "100.0%", "0.0%", "n=3/4", "1 unjudged", "3"]
    assert rule_row(unjudged, "run-rules", "R1")[2:7] == ["—", "—", "—", "—", "n=0/4"]


def test_run_without_rule_scorer_has_no_rules_block(client, viewer, rule_runs):
    other = make_eval_run(rule_runs["full"].eval_set, [True, False])
    client.force_login(viewer)
    page = get_body(client, reverse("evals:eval_run", args=[other.pk]))
    assert "run-rules-block" not in page
    assert "No rule-adherence scores" in get_body(client, reverse("evals:eval_run_rules", args=[other.pk]))


def test_api_run_rules(client, viewer, rule_runs):
    client.force_login(viewer)
    lean = client.get(f"/api/eval/runs/{rule_runs['lean'].pk}/rules").json()
    assert lean["run_id"] == rule_runs["lean"].pk and lean["uses_rules"] is True
    by_id = {r["rule_id"]: r for r in lean["rules"]}
    assert list(by_id) == ["R1", "R2", "R3"]
    r2 = by_id["R2"]
    assert (r2["coverage"], r2["cases"], r2["decided"], r2["dropped"]) == ("4/4", 4, 4, 3)
    assert (r2["absent_rate"], r2["honoured_rate"], r2["ignored_rate"]) == (0.75, 0.25, 0.0)
    assert r2["counts"] == {
        "honoured": 1,
        "rule_ignored": 0,
        "rule_absent": 3,
        "not_applicable": 0,
        "unjudged": 0,
        "judge_error": 0,
    }
    unjudged = client.get(f"/api/eval/runs/{rule_runs['lean_unjudged'].pk}/rules").json()
    r1 = {r["rule_id"]: r for r in unjudged["rules"]}["R1"]
    assert (r1["coverage"], r1["honoured_rate"], r1["counts"]["unjudged"]) == ("0/4", None, 4)
    missing = client.get("/api/eval/runs/nope/rules")
    assert missing.status_code == 404 and missing.json()["field"] == "run_id"


def test_compare_page_shows_r2_honoured_to_absent_with_case_links(client, viewer, rule_runs):
    client.force_login(viewer)
    a, b = rule_runs["full"], rule_runs["lean"]
    page = get_body(client, reverse("evals:compare") + f"?a={a.pk}&b={b.pk}")
    assert f'hx-get="{reverse("evals:compare_rules")}?a={a.pk}&amp;b={b.pk}"' in page
    body = get_body(client, reverse("evals:compare_rules") + f"?a={a.pk}&b={b.pk}")
    rows = re.findall(r'<tr data-rule="([^"]+)" data-flip="([^"]+)">(.*?)</tr>', body, re.S)
    assert [(rule, flip) for rule, flip, _ in rows] == [("R2", "honoured → rule_absent")]
    cells = re.findall(r"<td[^>]*>(.*?)</td>", rows[0][2], re.S)
    assert cells[2] == "3"
    links = re.findall(r'href="([^"]*compare/case/[^"]*)"', rows[0][2])
    assert sorted(re.search(r"case=([^&]+)", link).group(1) for link in links) == list(MULTI_TURN)
    case_page = get_body(client, links[0].replace("&amp;", "&"))
    assert "pricing" in case_page or "order" in case_page
    # reversed, the flips read the other way; the same run twice is refused
    back = get_body(client, reverse("evals:compare_rules") + f"?a={b.pk}&b={a.pk}")
    assert 'data-flip="rule_absent → honoured"' in back
    assert client.get(reverse("evals:compare_rules") + f"?a={a.pk}&b={a.pk}").status_code == 400


def test_api_compare_rules(client, viewer, rule_runs):
    client.force_login(viewer)
    a, b = rule_runs["full"], rule_runs["lean"]
    data = client.get("/api/eval/compare/rules", {"a": a.pk, "b": b.pk, "page_size": 2}).json()
    assert data["uses_rules"] is True and (data["a"], data["b"]) == (a.pk, b.pk)
    assert data["groups"] == [
        {"rule_id": "R2", "before": "honoured", "after": "rule_absent", "label": "honoured → rule_absent", "n": 3}
    ]
    assert (data["total"], data["pages"], len(data["items"])) == (3, 2, 2)
    second = client.get("/api/eval/compare/rules", {"a": a.pk, "b": b.pk, "page_size": 2, "page": 2}).json()
    flips = data["items"] + second["items"]
    assert [f["case_id"] for f in flips] == list(MULTI_TURN)
    for flip in flips:
        assert (flip["rule_id"], flip["before"], flip["after"], flip["repeat_index"]) == (
            "R2",
            "honoured",
            "rule_absent",
            0,
        )
        assert EvalResult.objects.get(pk=flip["a_seq"]).eval_run_id == a.pk
        assert EvalResult.objects.get(pk=flip["b_seq"]).case_id == flip["case_id"]
    same = client.get("/api/eval/compare/rules", {"a": a.pk, "b": a.pk})
    assert same.status_code == 400 and same.json()["field"] == "b"


def test_case_page_shows_each_rule_outcome_turns_and_reason(client, viewer, rule_runs):
    client.force_login(viewer)
    lean = rule_runs["lean"]
    result = EvalResult.objects.get(eval_run=lean, case_id="pricing-third-turn")
    body = get_body(client, reverse("evals:result", args=[lean.pk, result.pk]))
    r2 = rule_row(body, "case-rules", "R2")
    assert r2[1] == "rule_absent"
    assert r2[2].startswith("1 of 3") and "dropped after turn 1" in r2[2]
    assert r2[3] == "present in turn 1 of 3, then dropped"
    r1 = rule_row(body, "case-rules", "R1")
    assert r1[1:4] == ["honoured", "1, 2, 3 of 3", "complies"]
    full = rule_runs["full"]
    full_result = EvalResult.objects.get(eval_run=full, case_id="pricing-third-turn")
    full_body = get_body(client, reverse("evals:result", args=[full.pk, full_result.pk]))
    assert rule_row(full_body, "case-rules", "R2")[1:4] == ["honoured", "1, 2, 3 of 3 template", "complies"]


def test_rule_blocks_need_a_login_and_the_viewer_role(client, outsider, rule_runs):
    a, b = rule_runs["full"], rule_runs["lean"]
    urls = [reverse("evals:eval_run_rules", args=[a.pk]), reverse("evals:compare_rules") + f"?a={a.pk}&b={b.pk}"]
    for url in urls:
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/"), url
    client.force_login(outsider)
    for url in urls:
        assert client.get(url).status_code == 403, url
