"""A case page offers "Re-run this case" and "Open in playground" only when they can work
(issue 23): the run's target (and variant) is declared in the agents folder this portal serves.
Otherwise it says why in one muted line (an ``evalsite init`` project showing the runs of
``evalsite demo`` once answered both with a raw 400 form)."""

from __future__ import annotations

import textwrap

import pytest
from django.test import Client
from django.urls import reverse

from tests.apps.factories import make_eval_run, make_eval_set

pytestmark = pytest.mark.django_db

AGENTS = """
from evalcore.discovery import TargetSpec

def _echo(value):
    return value

echo = TargetSpec(id="echo", target=_echo)
picky = TargetSpec(id="picky", variants={"a": _echo, "b": _echo}, default_variant="a")
"""


@pytest.fixture
def agents_dir(tmp_path, settings):
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "project_agents.py").write_text(textwrap.dedent(AGENTS))
    settings.EVALSITE_AGENTS_DIR = folder
    return folder


def case_page(user, target_id: str, variant: str) -> str:
    eval_set = make_eval_set(f"qa-{target_id}-{variant}", 2, splits=("dev",))
    eval_run = make_eval_run(eval_set, [False, True], target_id=target_id, variant=variant)
    result = eval_run.results.order_by("id").first()
    assert result is not None
    client = Client()
    client.force_login(user)
    response = client.get(reverse("evals:result", args=[eval_run.pk, result.pk]))
    assert response.status_code == 200
    return response.content.decode()


def test_a_target_this_portal_has_is_offered(member, agents_dir):
    page = case_page(member, "echo", "v1")
    assert "Re-run this case" in page and "Open in playground" in page
    assert "case-actions-unavailable" not in page


def test_a_demo_target_missing_from_the_project_is_not_offered_and_the_page_says_why(member, agents_dir):
    page = case_page(member, "gsm8k-replay", "6b_finetuning")
    assert "Re-run this case" not in page and "Open in playground" not in page
    note = page.split('id="case-actions-unavailable">', 1)[1].split("</p>", 1)[0]
    assert "target &#x27;gsm8k-replay&#x27; is not in the agents folder this portal serves" in note
    assert str(agents_dir) in note


def test_a_variant_the_target_does_not_declare_is_not_offered(member, agents_dir):
    page = case_page(member, "picky", "c")
    assert "Re-run this case" not in page
    assert "has no variant &#x27;c&#x27; (variants: a, b)" in page
    assert "Re-run this case" in case_page(member, "picky", "b")


def test_a_viewer_gets_neither_the_buttons_nor_the_note(viewer, agents_dir):
    page = case_page(viewer, "gsm8k-replay", "6b_finetuning")
    assert "Re-run this case" not in page and "case-actions-unavailable" not in page
