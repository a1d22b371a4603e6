"""Admin authoring: every model registered, bulk actions, JSONL export, case-bank upload."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.contrib import admin
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from apps.agents.models import Message, Session
from apps.core.models import ApiToken
from apps.evals.models import EvalCase, EvalResult, EvalRun, EvalSet
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
    lines = [json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()]
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


def test_upload_reports_every_problem_in_the_file_not_only_the_first(client, staff):
    client.force_login(staff)
    body = (
        b'{"id": "q1", "input": "a", "split": "validation"}\n'
        b'{"id": "q2", "input": "b"}\n'
        b'{"input": "c"}\n'
        b'{"id": "q1", "input": "d"}\n'
        b'{"id": "q5", "input": "e", "expected": NaN}\n'
    )
    response = client.post(
        reverse("admin:evals_evalset_upload"),
        {"name": "many", "file": SimpleUploadedFile("many.jsonl", body), "split_ratios": "60/20/20"},
    )
    assert response.status_code == 400
    text = response.content.decode()
    for line in (1, 3, 4, 5):  # unknown split, missing id, duplicate id, NaN
        assert f"many.jsonl:{line}" in text, line
    assert "many.jsonl:2" not in text  # the good case is not reported
    assert not EvalSet.objects.filter(name="many").exists()


def test_upload_stops_looking_after_the_limit_and_says_so(client, staff, monkeypatch):
    from apps.evals.admin import sets as evals_admin

    monkeypatch.setattr(evals_admin, "UPLOAD_MAX_ERRORS", 3)
    client.force_login(staff)
    body = b"".join(b'{"input": "x%d"}\n' % i for i in range(10))  # ten cases without an id
    response = client.post(
        reverse("admin:evals_evalset_upload"),
        {"name": "lots", "file": SimpleUploadedFile("lots.jsonl", body), "split_ratios": "60/20/20"},
    )
    text = response.content.decode()
    assert [f"lots.jsonl:{n}:" in text for n in (1, 2, 3, 4)] == [True, True, True, False]
    assert "stopped after 3 problems" in text


def test_upload_needs_staff(client, member):
    client.force_login(member)
    response = client.get(reverse("admin:evals_evalset_upload"))
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_result_list_uses_no_full_count(client, staff):
    make_eval_run(make_eval_set("cnt", 3), [True, False, True])
    client.force_login(staff)
    assert client.get(reverse("admin:evals_evalresult_changelist")).status_code == 200
    assert EvalResult.objects.count() == 3


def _form_fields(html: str) -> dict[str, str]:
    """The posted values of the admin change form (inputs and textareas), as a browser sends them."""
    import re
    from html import unescape

    fields = {}
    for name, value in re.findall(r'<input[^>]*name="([^"]+)"[^>]*value="([^"]*)"', html):
        fields[name] = unescape(value)
    for name, value in re.findall(r'<textarea[^>]*name="([^"]+)"[^>]*>(.*?)</textarea>', html, re.S):
        fields[name] = unescape(value).lstrip("\n")
    return fields


def test_set_change_page_links_to_the_cases_and_saves_a_big_set(client, staff):
    """rs-08: a 1,319-case set's description is edited and saved; the page never inlines cases."""
    eval_set = make_eval_set("gsm8k_like", 1319)
    client.force_login(staff)
    url = f"/admin/evals/evalset/{eval_set.pk}/change/"
    page = client.get(url)
    html = page.content.decode()
    assert page.status_code == 200 and len(html) < 60_000
    assert "c1318" not in html and "cases-TOTAL_FORMS" not in html
    assert f"/admin/evals/evalcase/?eval_set__id__exact={eval_set.pk}" in html
    assert "1,319 cases (train 440, dev 440, test 439)" in html
    fields = {**_form_fields(html), "name": "gsm8k_like", "description": "GSM8K test, 1,319 questions"}
    fields.pop("csrfmiddlewaretoken", None)
    saved = client.post(url, fields)
    assert saved.status_code == 302, saved.content.decode()[:2000]
    eval_set.refresh_from_db()
    assert eval_set.description == "GSM8K test, 1,319 questions"
    assert eval_set.cases.count() == 1319


def test_every_admin_list_paginates(client, staff):
    from django.contrib import admin as django_admin

    many = make_eval_set("many", 260)
    client.force_login(staff)
    for model, model_admin in django_admin.site._registry.items():
        assert model_admin.list_per_page <= 100, model
    page = client.get("/admin/evals/evalcase/", {"eval_set__id__exact": many.pk})
    html = page.content.decode()
    assert page.status_code == 200 and html.count('name="_selected_action"') == 100
    assert "?p=2" in html or "p=2" in html


def test_upload_page_breadcrumbs(client, staff):
    client.force_login(staff)
    html = client.get("/admin/evals/evalset/upload/").content.decode()
    crumbs = html.split('<div class="breadcrumbs">', 1)[1].split("</div>", 1)[0]
    assert 'href="/admin/evals/"' in crumbs and 'href="/admin/evals/evalset/"' in crumbs
    assert crumbs.rstrip().endswith("Upload a case bank")


ADK_FILE = (
    Path(__file__).resolve().parents[2] / "fixtures" / "adk" / ("adk-python__hello_world_agent__roll_die.test.json")
)


def _stored_hash_is_the_recomputed_one(eval_set: EvalSet) -> None:
    """The hash written at import is the one definition (recomputed from the stored cases)."""
    from apps.evals.sets import cases as sets

    written = eval_set.content_hash
    sets.refresh_set_hashes([eval_set.pk])
    eval_set.refresh_from_db()
    assert written and eval_set.content_hash == written


@pytest.mark.parametrize("max_memory", [2_621_440, 16])  # in memory, and spooled to a temporary file
def test_upload_reads_the_file_object_gzipped_or_not(client, staff, settings, max_memory):
    import gzip

    settings.FILE_UPLOAD_MAX_MEMORY_SIZE = max_memory
    client.force_login(staff)
    body = gzip.compress(b'{"id": "q1", "input": "2+2?", "expected": "4"}\n{"id": "q2", "input": "3+3?"}\n')
    response = client.post(
        reverse("admin:evals_evalset_upload"),
        {"name": "zipped", "file": SimpleUploadedFile("bank.jsonl.gz", body), "split_ratios": "60/20/20"},
    )
    assert response.status_code == 302
    eval_set = EvalSet.objects.get(name="zipped")
    assert sorted(EvalCase.objects.filter(eval_set=eval_set).values_list("case_id", flat=True)) == ["q1", "q2"]
    _stored_hash_is_the_recomputed_one(eval_set)


def test_upload_of_an_adk_file_is_read_as_adk(client, staff):
    client.force_login(staff)
    response = client.post(
        reverse("admin:evals_evalset_upload"),
        {"name": "adk", "file": SimpleUploadedFile(ADK_FILE.name, ADK_FILE.read_bytes()), "split_ratios": "60/20/20"},
    )
    assert response.status_code == 302
    case = EvalCase.objects.get(eval_set__name="adk")
    assert case.metadata["source"] == "adk" and case.split == assign_split("adk", case.case_id)
    _stored_hash_is_the_recomputed_one(EvalSet.objects.get(name="adk"))


def test_cli_import_of_an_adk_file_writes_the_same_hash_as_any_other_file():
    from apps.evals.cli.console import load_set

    eval_set, _ = load_set(str(ADK_FILE), mapping=None, auto_id=False)
    assert eval_set.name == "adk-python__hello_world_agent__roll_die"
    _stored_hash_is_the_recomputed_one(eval_set)


@pytest.mark.parametrize("field", ["tags", "metadata"])
def test_the_case_form_refuses_a_nul_character_in_json_fields(client, staff, field):
    """Tags or metadata holding U+0000 were a 500 on PostgreSQL (DataError); the form refuses them
    on every database, as Django's forms refuse NUL in text."""
    client.force_login(staff)
    eval_set = make_eval_set("nulform", 1)
    case = EvalCase.objects.get(eval_set=eval_set)
    url = reverse("admin:evals_evalcase_change", args=[case.pk])
    form = {
        "eval_set": eval_set.pk,
        "case_id": case.case_id,
        "input": json.dumps(case.input),
        "expected": json.dumps(case.expected),
        "has_expected": "on",
        "split": case.split,
        "tags": "ok",  # comma-separated text
        "metadata": json.dumps({}),
        "position": case.position,
    }
    # tags as a JSON list (still read as one): the escaped NUL passes the request checks
    form[field] = json.dumps(["a\x00"] if field == "tags" else {"k\x00": 1})
    answer = client.post(url, form)
    assert answer.status_code == 200  # the form again, with the error
    assert "Null characters are not allowed" in answer.content.decode()
    case.refresh_from_db()
    assert "\x00" not in json.dumps(case.tags)
    assert "\x00" not in json.dumps(case.metadata)
