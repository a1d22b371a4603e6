"""The playground and capture as a new user meets them (issue 11): JSON targets take plain text
when their input has one free-text field and offer a template, errors come back as 4xx with the
message beside the input, a capture is pre-filled and checked in the set's shape and can be run
at once, and a case page re-runs its case or opens it in the playground.
"""

from __future__ import annotations

import json
import textwrap

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from apps.agents.models import Message, Session
from apps.agents.services import chat_turn, start_session
from apps.evals.models import EvalCase, EvalRun
from tests.apps.evals.test_consumers import roles  # noqa: F401 - autouse: the groups after each flush
from tests.apps.factories import make_eval_run, make_eval_set

# the one-case runs execute in the task worker, whose result writer needs committed rows
pytestmark = pytest.mark.django_db(transaction=True)

HX = {"HTTP_HX_REQUEST": "true"}

AGENTS = """
import re
from evalcore.discovery import TargetSpec

def _ask(value):
    if not isinstance(value, dict):
        raise TypeError(f"takes an object, got {type(value).__name__}")
    n = int(re.search(r"(\\d+) \\+", value["question"]).group(1))
    return str(2 * n)

def _echo(value):
    return value

asker = TargetSpec(id="asker", target=_ask, input_kind="json", scorers=["exact_match"])
echo_json = TargetSpec(id="echo-json", target=_echo, input_kind="json")
schema_echo = TargetSpec(
    id="schema-echo",
    target=_echo,
    input_kind="json",
    input_schema={"type": "object", "properties": {"question": {"type": "string"}, "k": {"type": "integer"}}},
)
"""


@pytest.fixture
def agents_dir(tmp_path, settings):
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "askers.py").write_text(textwrap.dedent(AGENTS))
    settings.EVALSITE_AGENTS_DIR = folder
    return folder


@pytest.fixture
def qa():
    """A set of questions ``what is i + i?`` expecting ``"2i"``; ``asker`` has run on it."""
    eval_set = make_eval_set("qa", 6, splits=("dev",))
    make_eval_run(eval_set, [True], target_id="asker", variant="", case_ids=["c0"])
    return eval_set


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_json_target_takes_plain_text_into_its_one_free_text_field(member, agents_dir, qa):
    session = start_session(user=member, target_id="asker", input_mode="json")
    turn = chat_turn(session=session, content="what is 21 + 21?")
    assert turn.reply.content == "42"
    # the input sent: the set's first case with the typed text as its question
    echo = start_session(user=member, target_id="echo-json", input_mode="json")
    make_eval_run(qa, [True], target_id="echo-json", variant="", case_ids=["c1"])
    assert chat_turn(session=echo, content="what is 21 + 21?").run.final_answer == {"question": "what is 21 + 21?"}
    # JSON typed is sent as is
    assert chat_turn(session=echo, content='{"question": "q", "n": 2}').run.final_answer == {"question": "q", "n": 2}
    page = logged_in(member).get(reverse("agents:session", args=[session.pk])).content.decode()
    assert "takes JSON like this" in page and "sent as <code>question</code>" in page
    assert "&quot;question&quot;: &quot;what is 0 + 0?&quot;" in page  # the template, from the first case
    prefilled = logged_in(member).get(reverse("agents:session", args=[session.pk]) + "?template=1").content.decode()
    assert "&quot;question&quot;: &quot;what is 0 + 0?&quot;\n}</textarea>" in prefilled


def test_declared_input_schema_is_the_template(member, agents_dir, qa):
    session = start_session(user=member, target_id="schema-echo", input_mode="json")
    turn = chat_turn(session=session, content="what is 4 + 4?")
    assert turn.run.final_answer == {"question": "what is 4 + 4?", "k": 0}
    # the page says which fields plain text leaves to the template (they are sent as shown)
    page = logged_in(member).get(reverse("agents:session", args=[session.pk])).content.decode()
    assert "sent as <code>question</code>, with <code>k</code> taken from this template" in page


def test_bad_json_is_a_400_with_the_error_beside_the_input(member, agents_dir, qa):
    client = logged_in(member)
    session = start_session(user=member, target_id="asker", input_mode="json")
    sent = client.post(reverse("agents:send", args=[session.pk]), {"content": '{"question": '}, **HX)
    assert sent.status_code == 400
    text = sent.content.decode()
    assert "<html" not in text  # a fragment the page's htmx error handler swaps in
    assert 'role="alert" class="field-error"' in text and "this target takes JSON: line 1 column" in text
    assert "the input looks like" in text
    assert not Message.objects.filter(session=session).exists()
    # a target that refuses its input: the error is the reply, shown in the chat
    ok = client.post(reverse("agents:send", args=[session.pk]), {"content": '{"q": 1}'}, **HX)
    assert ok.status_code == 200 and "[error] KeyError: " in ok.content.decode()


def test_every_page_loads_the_htmx_error_handler_and_a_favicon(client, member, agents_dir, qa):
    client.force_login(member)
    page = client.get(reverse("agents:playground")).content.decode()
    assert 'src="/static/evalsite/htmx-errors.js"' in page and "<script>" not in page
    assert 'id="htmx-error"' in page and 'rel="icon"' in page
    favicon = client.get("/favicon.ico")
    assert favicon.status_code == 301 and favicon["Location"].endswith("evalsite/favicon.svg")


def test_capture_prefills_in_the_set_shape_refuses_another_shape_and_runs_the_case(member, agents_dir, qa):
    client = logged_in(member)
    session = start_session(user=member, target_id="asker", input_mode="json")
    chat_turn(session=session, content="what is 30 + 30?")
    url = reverse("agents:capture", args=[session.pk])
    form = client.get(url).content.decode()
    # the set's cases expect strings: the answer pre-filled as a JSON string, the set picked
    assert "cases expect a string" in form
    assert "&quot;60&quot;</textarea>" in form
    assert f'<option value="{qa.pk}" selected>' in form
    posted = {
        "eval_set": qa.pk,
        "case_id": "p60",
        "split": "dev",
        "input": json.dumps({"question": "what is 30 + 30?"}),
        "expected": json.dumps({"answer": "60"}),
        "then": "run",
    }
    refused = client.post(url, posted)
    assert refused.status_code == 400
    assert "this set&#x27;s cases expect a string; this is a JSON object" in refused.content.decode()
    assert not EvalCase.objects.filter(case_id="p60").exists()

    saved = client.post(url, {**posted, "expected": json.dumps("60")})
    assert saved.status_code == 302
    new_run = EvalRun.objects.get(config__case_ids=["p60"])
    assert saved["Location"] == reverse("evals:eval_run", args=[new_run.pk])
    assert (new_run.target_id, new_run.n_total, new_run.status) == ("asker", 1, "queued")
    call_command("db_worker", "--batch", "--no-startup-delay", "--no-reload", verbosity=0)
    new_run.refresh_from_db()
    assert (new_run.status, new_run.n_done, new_run.n_passed) == ("finished", 1, 1)
    assert list(new_run.results.values_list("case_id", flat=True)) == ["p60"]


def test_a_rerun_that_cannot_start_says_why_on_the_case_page(member, agents_dir, qa):
    eval_run = make_eval_run(qa, [False], target_id="asker", variant="", case_ids=["c3"])
    result = eval_run.results.get()
    EvalCase.objects.filter(eval_set=qa, case_id="c3").delete()  # the case left the set since
    client = logged_in(member)
    rerun = client.post(reverse("evals:rerun_case", args=[eval_run.pk, result.pk]), follow=True)
    assert rerun.redirect_chain[-1][0] == reverse("evals:result", args=[eval_run.pk, result.pk])
    assert "could not re-run case &#x27;c3&#x27;: set qa has no case &#x27;c3&#x27;" in rerun.content.decode()
    assert not EvalRun.objects.filter(config__case_ids=["c3"]).exists()


def test_case_page_reruns_the_case_and_opens_it_in_the_playground(member, viewer, agents_dir, qa):
    eval_run = make_eval_run(qa, [False], target_id="asker", variant="", case_ids=["c3"])
    result = eval_run.results.get()
    page_url = reverse("evals:result", args=[eval_run.pk, result.pk])
    client = logged_in(member)
    page = client.get(page_url).content.decode()
    assert "Re-run this case" in page and "Open in playground" in page
    assert "Re-run this case" not in logged_in(viewer).get(page_url).content.decode()
    assert logged_in(viewer).post(reverse("evals:rerun_case", args=[eval_run.pk, result.pk])).status_code == 403

    rerun = client.post(reverse("evals:rerun_case", args=[eval_run.pk, result.pk]))
    new_run = EvalRun.objects.get(config__case_ids=["c3"])
    assert rerun.status_code == 302 and rerun["Location"] == reverse("evals:eval_run", args=[new_run.pk])
    call_command("db_worker", "--batch", "--no-startup-delay", "--no-reload", verbosity=0)
    new_run.refresh_from_db()
    assert (new_run.status, new_run.n_done, new_run.n_passed) == ("finished", 1, 1)

    case = EvalCase.objects.get(eval_set=qa, case_id="c3")
    opened = client.post(
        reverse("agents:new_session"), {"target": "asker", "variant": "", "input_mode": "auto", "case": case.pk}
    )
    session = Session.objects.get(user=member, target_id="asker")
    assert session.input_mode == "json"
    assert opened["Location"] == reverse("agents:session", args=[session.pk]) + f"?case={case.pk}"
    chat = client.get(opened["Location"]).content.decode()
    assert "&quot;question&quot;: &quot;what is 3 + 3?&quot;\n}</textarea>" in chat


def test_picking_another_set_refills_only_the_expected_value_in_its_shape(member, agents_dir, qa):
    from apps.evals.models import EvalSet

    objects = EvalSet.objects.create(name="objects", content_hash="h")
    EvalCase.objects.create(eval_set=objects, case_id="o1", input={}, expected={"answer": "x", "steps": []})
    client = logged_in(member)
    session = start_session(user=member, target_id="asker", input_mode="json")
    chat_turn(session=session, content="what is 5 + 5?")
    block = client.get(
        reverse("agents:capture", args=[session.pk]),
        {"eval_set": objects.pk},
        HTTP_HX_REQUEST="true",
        HTTP_HX_TARGET="expected-block",
    ).content.decode()
    assert 'name="case_id"' not in block and 'name="expected"' in block  # the other fields keep their input
    assert "cases expect a JSON object with &quot;answer&quot;, &quot;steps&quot;" in block
    assert "&quot;answer&quot;: &quot;10&quot;" in block and "&quot;steps&quot;: []" in block  # from the example case
