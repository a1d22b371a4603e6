"""The admin a person sits in (issue 26): tags as comma-separated text (the capture form's parser),
the case list in a bounded number of queries, the bulk actions and search on it, the restyle."""

from __future__ import annotations

import json

import pytest
from django.contrib import admin
from django.urls import reverse

from apps.evals.models import EvalCase
from apps.evals.sets.tag_text import TagsTextField, TagTextError, parse_tag_text, tags_as_text
from apps.evals.views.capture import CaptureForm
from tests.apps.factories import make_eval_set

pytestmark = pytest.mark.django_db

CHANGELIST = "admin:evals_evalcase_changelist"


def _case_form(case: EvalCase, **changes: str) -> dict[str, object]:
    form: dict[str, object] = {
        "eval_set": case.eval_set_id,
        "case_id": case.case_id,
        "input": json.dumps(case.input),
        "expected": json.dumps(case.expected),
        "has_expected": "on",
        "split": case.split,
        "tags": tags_as_text(case.tags),
        "metadata": json.dumps(case.metadata),
        "position": case.position,
    }
    form.update(changes)
    return form


@pytest.mark.parametrize(
    ("text", "tags"),
    [
        ("", []),
        ("  ", []),
        ("math", ["math"]),
        (" math , hard,,math, ", ["math", "hard"]),
        ('["a, b", "c"]', ["a, b", "c"]),  # a JSON list (the old admin's text) is that list
        ("[a, b]", ["[a", "b]"]),  # not JSON: plain text
    ],
)
def test_parse_tag_text(text, tags):
    assert parse_tag_text(text) == tags


@pytest.mark.parametrize(
    ("text", "message"),
    [("a, b\x00", "tags: Null characters are not allowed"), ("a\nb", "tags: tag 1"), ("x" * 501, "at most 500")],
)
def test_parse_tag_text_refuses_what_cannot_be_stored(text, message):
    with pytest.raises(TagTextError, match=message):
        parse_tag_text(text)


def test_the_capture_form_and_the_admin_use_the_same_field():
    from apps.evals.admin.sets import EvalCaseForm, TagsForm

    for form in (CaptureForm, EvalCaseForm, TagsForm):
        assert isinstance(form.base_fields["tags"], TagsTextField), form


def test_case_form_shows_tags_as_text_and_saves_the_list(client, staff):
    eval_set = make_eval_set("tagtext", 2)
    case = EvalCase.objects.get(eval_set=eval_set, case_id="c0")
    EvalCase.objects.filter(pk=case.pk).update(tags=["math", "hard"])
    url = reverse("admin:evals_evalcase_change", args=[case.pk])
    client.force_login(staff)
    page = client.get(url).content.decode()
    assert 'name="tags" value="math, hard"' in page
    case.refresh_from_db()
    answer = client.post(url, _case_form(case, tags=" arith , hard,, arith"))
    assert answer.status_code == 302
    case.refresh_from_db()
    assert case.tags == ["arith", "hard"]
    # saved unchanged, the text round-trips to the same list
    client.post(url, _case_form(case))
    case.refresh_from_db()
    assert case.tags == ["arith", "hard"]
    # blank text: no tags
    client.post(url, _case_form(case, tags=""))
    case.refresh_from_db()
    assert case.tags == []


def test_case_form_refuses_bad_tags_naming_the_field_and_saves_nothing(client, staff):
    eval_set = make_eval_set("tagbad", 1)
    case = EvalCase.objects.get(eval_set=eval_set)
    url = reverse("admin:evals_evalcase_change", args=[case.pk])
    client.force_login(staff)
    answer = client.post(url, _case_form(case, tags="ok, two\nlines", case_id="renamed"))
    assert answer.status_code == 200
    page = answer.content.decode()
    assert "tags: tag 2" in page and "spans lines" in page
    row = page.split("form-row field-tags", 1)[1].split("form-row", 1)[0]
    assert "spans lines" in row  # shown at the tags field
    case.refresh_from_db()
    assert (case.case_id, case.tags) == ("c0", ["even"])


def test_add_tags_action_refuses_bad_text_and_changes_nothing(client, staff):
    eval_set = make_eval_set("tagact", 2)
    cases = list(EvalCase.objects.filter(eval_set=eval_set))
    client.force_login(staff)
    data = {
        "action": "add_tags",
        admin.helpers.ACTION_CHECKBOX_NAME: [c.pk for c in cases],
        "apply": "1",
        "tags": "x\x00",
    }
    # a raw NUL is refused before any form; an escaped one inside JSON reaches the parser
    data["tags"] = json.dumps(["x\x00"])
    answer = client.post(reverse(CHANGELIST), data)
    assert answer.status_code == 200 and "Null characters are not allowed" in answer.content.decode()
    assert sorted(t for c in EvalCase.objects.filter(eval_set=eval_set) for t in c.tags) == ["even", "odd"]


def test_case_list_queries_are_bounded_at_200_cases(client, staff, django_assert_max_num_queries):
    eval_set = make_eval_set("many", 200)
    make_eval_set("other", 3)
    client.force_login(staff)
    base = reverse(CHANGELIST)
    for url in (base, f"{base}?eval_set__id__exact={eval_set.pk}", f"{base}?tag=odd", f"{base}?q=c19", f"{base}?p=2"):
        # session, user, count, page of rows (set joined), the set filter's choices, the tag filter's
        with django_assert_max_num_queries(8):
            answer = client.get(url)
        assert answer.status_code == 200, url
    page = client.get(base).content.decode()
    assert page.count('class="action-select"') == 100  # a page of 100 rows, each with its checkbox
    assert 'id="action-toggle"' in page


def test_search_and_bulk_actions_work_on_the_list(client, staff):
    eval_set = make_eval_set("bulk", 30)
    client.force_login(staff)
    found = client.get(reverse(CHANGELIST) + "?q=c2").content.decode()
    assert ">c2<" in found and ">c21<" in found and ">c3<" not in found
    picked = list(EvalCase.objects.filter(eval_set=eval_set, case_id__in=["c1", "c2"]))
    data = {"action": "assign_test", admin.helpers.ACTION_CHECKBOX_NAME: [c.pk for c in picked]}
    assert client.post(reverse(CHANGELIST), data).status_code == 302
    assert set(EvalCase.objects.filter(eval_set=eval_set, split="test").values_list("case_id", flat=True)) >= {
        "c1",
        "c2",
    }
    data = {"action": "add_tags", admin.helpers.ACTION_CHECKBOX_NAME: [c.pk for c in picked], "apply": "1"}
    client.post(reverse(CHANGELIST), {**data, "tags": "flaky, hard"})
    assert EvalCase.objects.get(eval_set=eval_set, case_id="c1").tags == ["odd", "flaky", "hard"]


def test_admin_pages_carry_the_portal_look(client, staff):
    client.force_login(staff)
    page = client.get(reverse("admin:index")).content.decode()
    assert "evalsite/admin.css" in page
    assert ">Evalsite<" in page or "Evalsite admin" in page
    assert 'href="/"' in page  # back to the portal
    assert "style=" not in page.split("<body", 1)[1].split("</header>", 1)[0]  # no inline style in the header
