"""Sets have versions (issue 13 §4): each import or edit that changes the cases records one (hash,
time, who, from where, counts); a run records the version it ran against; a case page says the
set moved on since; two versions diff by case id. Repro bh-30's data in tests/fixtures/repros."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.management import call_command
from django.urls import reverse

from apps.evals.models import EvalCase, EvalResult, EvalRun, EvalSet, SetVersion
from apps.evals.sets.cases import import_cases, refresh_set_hashes
from apps.evals.sets.versions import diff_versions
from evalcore.loaders import load_cases
from evalcore.types import Case

REPROS = Path(__file__).resolve().parents[2] / "fixtures" / "repros"


@pytest.mark.django_db(transaction=True)
def test_bh30_run_records_its_version_and_the_case_page_names_the_newer_one(client, viewer):
    agents = str(REPROS / "agents")
    call_command("eval", agents, "--set", str(REPROS / "bh-30-capitals.jsonl"), "--target", "echo", "--quiet")
    call_command("import", str(REPROS / "bh-30-capitals.jsonl"))  # the same file again: no new version
    call_command("import", str(REPROS / "bh-30-capitals-edited.jsonl"), "--name", "bh-30-capitals")
    eval_set = EvalSet.objects.get(name="bh-30-capitals")
    v1, v2 = SetVersion.objects.filter(eval_set=eval_set).order_by("number")
    assert (v1.number, v1.added, v1.updated, v1.removed, v1.n_cases) == (1, 1, 0, 0, 1)
    assert (v2.number, v2.added, v2.updated, v2.removed) == (2, 0, 1, 0)
    assert v2.content_hash == eval_set.content_hash and "bh-30-capitals-edited.jsonl" in v2.source
    eval_run = EvalRun.objects.get()
    assert eval_run.set_version == v1
    result = EvalResult.objects.get(eval_run=eval_run)
    client.force_login(viewer)
    page = client.get(reverse("evals:result", args=[eval_run.pk, result.pk])).content.decode()
    assert "Scored against set version v1; the set is at v2 now" in page
    diff_url = f"{reverse('evals:set_versions', args=[eval_set.pk])}?a=1&amp;b=2"
    assert diff_url in page
    diff_page = client.get(diff_url.replace("&amp;", "&")).content.decode()
    changed = diff_page[diff_page.index("<h2>changed") : diff_page.index("<h2>removed")]
    (case_id,) = EvalCase.objects.filter(eval_set=eval_set).values_list("case_id", flat=True)
    assert f"<li>{case_id}</li>" in changed
    set_page = client.get(reverse("evals:set", args=[eval_set.pk])).content.decode()
    assert 'data-version="2"' in set_page and 'data-version="1"' in set_page and "on v1" in set_page


@pytest.mark.django_db
def test_edits_outside_imports_record_versions_with_who_and_what(staff, tmp_path):
    path = tmp_path / "bank.jsonl"
    path.write_text(
        "".join(f'{{"id": "c{i}", "input": "q{i}", "expected": "a{i}", "split": "dev"}}\n' for i in range(3))
    )
    bank = load_cases(path)
    import_cases(name="bank", cases=bank.cases, content_hash=bank.content_hash, source_path=str(path), user=staff)
    eval_set = EvalSet.objects.get(name="bank")
    EvalCase.objects.filter(eval_set=eval_set, case_id="c1").update(tags=["hard"])
    EvalCase.objects.filter(eval_set=eval_set, case_id="c2").delete()
    refresh_set_hashes([eval_set.pk], source="admin: tags", user=staff)
    refresh_set_hashes([eval_set.pk], source="nothing changed")  # same cases: no version
    v1, v2 = SetVersion.objects.filter(eval_set=eval_set).order_by("number")
    assert (v1.created_by, v2.created_by, v2.source) == (staff, staff, "admin: tags")
    assert (v2.added, v2.updated, v2.removed, v2.n_cases) == (0, 1, 1, 2)
    change = diff_versions(v1, v2)
    assert (change.added, change.changed, change.removed) == ([], ["c1"], ["c2"])
    # a new file that adds one and drops the rest
    import_cases(name="bank", cases=[Case("c9", "q9", "a9", split="dev")], content_hash="other", source_path="b2")
    v3 = SetVersion.objects.get(eval_set=eval_set, number=3)
    assert (v3.added, v3.removed, v3.n_cases, v3.created_by) == (1, 2, 1, None)
