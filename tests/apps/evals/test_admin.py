"""Admin authoring: every model registered, bulk actions, JSONL export, case-bank upload."""

from __future__ import annotations

import json

import pytest
from django.contrib import admin
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from apps.agents.models import Message, Session
from apps.evals.models import ApiToken, EvalCase, EvalResult, EvalRun, EvalSet
from apps.traces.models import Event, Run
from evalcore.splits import assign_split
from tests.apps.factories import add_trace, make_eval_run, make_eval_set

pytestmark = pytest.mark.django_db

CHANGELIST = "admin:evals_evalcase_changelist"


def test_every_model_is_registered():
    for model in (EvalSet, EvalCase, EvalRun, EvalResult, ApiToken, Run, Event, Session, Message):
        assert admin.site.is_registered(model), model


def test_admin_pages_render(client, staff):
    eval_set = make_eval_set("adm", 4)
    eval_run = make_eval_run(eval_set, [True, False])
    run = Run.objects.first()
    add_trace(run)
    client.force_login(staff)
    urls = [
        reverse("admin:evals_evalset_changelist"),
        reverse("admin:evals_evalset_change", args=[eval_set.pk]),
        reverse(CHANGELIST),
        reverse(CHANGELIST) + "?tag=odd",
        reverse("admin:evals_evalrun_changelist"),
        reverse("admin:evals_evalrun_change", args=[eval_run.pk]),
        reverse("admin:evals_evalresult_changelist"),
        reverse("admin:traces_run_changelist"),
        reverse("admin:traces_event_changelist"),
        reverse("admin:traces_event_change", args=[Event.objects.first().pk]),
        reverse("admin:evals_evalset_upload"),
    ]
    for url in urls:
        assert client.get(url).status_code == 200, url
    odd = client.get(reverse(CHANGELIST) + "?tag=odd").content.decode()
    assert ">c1<" in odd and ">c0<" not in odd
    # results and runs are read-only
    assert client.get(reverse("admin:evals_evalresult_add")).status_code == 403
    assert client.get(reverse("admin:traces_event_add")).status_code == 403


def _action(client, action, cases, **extra):
    data = {"action": action, admin.helpers.ACTION_CHECKBOX_NAME: [c.pk for c in cases], **extra}
    return client.post(reverse(CHANGELIST), data)


def test_assign_split_and_resplit_by_hash(client, staff):
    eval_set = make_eval_set("spl", 6)
    cases = list(EvalCase.objects.filter(eval_set=eval_set))
    client.force_login(staff)
    assert _action(client, "assign_test", cases[:3]).status_code == 302
    assert list(
        EvalCase.objects.filter(eval_set=eval_set, split="test").order_by("position").values_list("case_id", flat=True)
    )[:3] == ["c0", "c1", "c2"]
    _action(client, "resplit_by_hash", cases)
    for case in EvalCase.objects.filter(eval_set=eval_set):
        assert case.split == assign_split("spl", case.case_id)


def test_add_and_remove_tags_through_the_intermediate_form(client, staff):
    eval_set = make_eval_set("tags", 3)
    cases = list(EvalCase.objects.filter(eval_set=eval_set).order_by("position"))
    client.force_login(staff)
    page = _action(client, "add_tags", cases[:2])
    assert page.status_code == 200 and b'name="apply"' in page.content
    _action(client, "add_tags", cases[:2], apply="1", tags="hard, math")
    assert EvalCase.objects.get(pk=cases[0].pk).tags == ["even", "hard", "math"]
    assert EvalCase.objects.get(pk=cases[2].pk).tags == ["even"]
    _action(client, "remove_tags", cases, apply="1", tags="hard,even")
    assert EvalCase.objects.get(pk=cases[0].pk).tags == ["math"]
    assert EvalCase.objects.get(pk=cases[1].pk).tags == ["odd", "math"]


def test_export_jsonl(client, staff):
    eval_set = make_eval_set("exp", 2)
    client.force_login(staff)
    response = _action(client, "export_jsonl", EvalCase.objects.filter(eval_set=eval_set))
    assert response["Content-Type"].startswith("application/x-ndjson")
    lines = [json.loads(line) for line in response.content.decode().splitlines()]
    assert lines[0] == {
        "id": "c0",
        "input": {"question": "what is 0 + 0?"},
        "expected": "0",
        "tags": ["even"],
        "split": "train",
        "metadata": {},
    }
    assert len(lines) == 2


def test_upload_good_file_imports_every_case(client, staff):
    client.force_login(staff)
    body = (
        b'{"id": "q1", "input": "2+2?", "expected": "4", "split": "dev"}\n'
        b'{"id": "q2", "input": "3+3?", "expected": "6"}\n'
    )
    response = client.post(
        reverse("admin:evals_evalset_upload"),
        {"name": "uploaded", "file": SimpleUploadedFile("bank.jsonl", body), "split_ratios": "60/20/20"},
    )
    assert response.status_code == 302
    eval_set = EvalSet.objects.get(name="uploaded")
    assert sorted(EvalCase.objects.filter(eval_set=eval_set).values_list("case_id", flat=True)) == ["q1", "q2"]
    assert EvalCase.objects.get(eval_set=eval_set, case_id="q1").split == "dev"
    assert eval_set.content_hash


def test_upload_bad_file_names_line_and_field_and_imports_nothing(client, staff):
    make_eval_set("keep", 2)
    client.force_login(staff)
    body = b'{"id": "q1", "input": "a", "expected": "1"}\n{"id": "q2", "input": "b", "split": "validation"}\n'
    response = client.post(
        reverse("admin:evals_evalset_upload"),
        {"name": "keep", "file": SimpleUploadedFile("bad.jsonl", body), "split_ratios": "60/20/20"},
    )
    assert response.status_code == 400
    text = response.content.decode()
    assert "bad.jsonl:2" in text and "split" in text
    assert "/tmp" not in text  # the temporary path is not leaked
    # the set still holds exactly its old cases
    assert sorted(EvalCase.objects.filter(eval_set__name="keep").values_list("case_id", flat=True)) == ["c0", "c1"]


def test_upload_needs_staff(client, member):
    client.force_login(member)
    response = client.get(reverse("admin:evals_evalset_upload"))
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_result_list_uses_no_full_count(client, staff):
    make_eval_run(make_eval_set("cnt", 3), [True, False, True])
    client.force_login(staff)
    assert client.get(reverse("admin:evals_evalresult_changelist")).status_code == 200
    assert EvalResult.objects.count() == 3
