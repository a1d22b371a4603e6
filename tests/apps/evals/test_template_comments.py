"""Template comments never reach the page, and a live run that ends gains its finished-run blocks
without a reload (issue 23).

Django's ``{# … #}`` is single-line only: one spanning two lines is plain text and is sent to the
browser as is. Every template's source is read through Django's own lexer (so every branch of
every template is covered, not only the ones a context happens to render): a text token holding
``{#`` is such a comment. The run page and the websocket's final message are rendered for real.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings
from django.template.base import Lexer, TokenType
from django.utils import timezone

from apps.evals.models import EvalRun
from apps.evals.views.live import fetch_after, render_messages
from tests.apps.factories import make_eval_run, make_eval_set


def _template_files() -> list[Path]:
    dirs = [Path(d) for engine in settings.TEMPLATES for d in engine["DIRS"]]
    dirs += list((Path(settings.BASE_DIR) / "apps").glob("*/templates"))
    files = sorted({f for d in dirs for f in d.rglob("*.html")})
    assert files, "no templates found"
    return files


@pytest.mark.parametrize("path", _template_files(), ids=lambda p: p.name)
def test_no_template_sends_a_comment_to_the_page(path: Path) -> None:
    tokens = Lexer(path.read_text(encoding="utf-8")).tokenize()
    leaks = [t for t in tokens if t.token_type == TokenType.TEXT and "{#" in t.contents]
    assert not leaks, (
        f"{path}: line {leaks[0].lineno} starts a {{# comment #}} Django does not strip "
        "(it spans lines: use {% comment %})"
    )


@pytest.mark.django_db
def test_the_final_live_message_brings_the_finished_run_blocks():
    eval_set = make_eval_set("live", 4)
    eval_run = make_eval_run(eval_set, [True, False, True, True], status="finished")
    poll = fetch_after(eval_run.pk, 0, latest=20)
    assert poll is not None
    frames = render_messages(poll, final=True)
    html = "".join(frames)
    assert "{#" not in html and "#}" not in html
    blocks = next(f for f in frames if 'id="run-finished-blocks"' in f)
    # Swapped in by id, out of band, holding the blocks that load after the page.
    assert 'id="run-finished-blocks" hx-swap-oob="true"' in blocks
    assert f'hx-get="/runs/{eval_run.pk}/distributions/"' in blocks
    assert "<h2>Distributions</h2>" in blocks and 'id="review-agreement"' in blocks


@pytest.mark.django_db
def test_a_progress_message_does_not_bring_them():
    eval_set = make_eval_set("live", 4)
    eval_run = make_eval_run(eval_set, [True, False, True, True], status="running")
    poll = fetch_after(eval_run.pk, 0, latest=20)
    assert poll is not None
    html = "".join(render_messages(poll, final=False))
    assert "run-finished-blocks" not in html and "{#" not in html


@pytest.mark.django_db
@pytest.mark.parametrize("status", ["running", "finished"])
def test_the_run_page_holds_the_blocks_place_and_no_comment(client, viewer, status):
    eval_set = make_eval_set("live", 4)
    eval_run = make_eval_run(eval_set, [True, False, True, True], status=status)
    # a fresh heartbeat: the page does not mark the run interrupted (apps.evals.runs.liveness)
    EvalRun.objects.filter(pk=eval_run.pk).update(heartbeat_at=timezone.now())
    client.force_login(viewer)
    body = client.get(f"/runs/{eval_run.pk}/").content.decode()
    assert "{#" not in body and "#}" not in body
    place = body.split('id="run-finished-blocks"', 1)[1].split("</div>", 1)[0]
    if status == "running":
        assert "Distributions" not in place  # empty until the final message fills it
    else:
        assert "<h2>Distributions</h2>" in place
