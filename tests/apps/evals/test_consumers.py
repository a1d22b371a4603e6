"""Live progress websocket: access, replay after a sequence number, tailing rows written later."""

from __future__ import annotations

import json
import re

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from apps.evals.models import EvalResult, EvalRun
from apps.evals.views.live import CLOSE_FORBIDDEN, CLOSE_NOT_FOUND, LIVE_ROWS
from apps.traces.models import Run
from evalcore.serial import to_record
from evalcore.types import Score
from evalsite.asgi import application
from tests.apps.factories import make_eval_run, make_eval_set

# Channels tests need real commits (the consumer reads from other threads).
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def roles(transactional_db):
    """The viewer/member groups of migration 0002_roles, again.

    Transactional tests flush the database afterwards, and the flush drops data that migrations
    created (the groups); permissions come back through post_migrate. ``serialized_rollback``
    would restore them but clashes with content types recreated by an earlier flush.
    """
    from importlib import import_module

    from django.contrib.auth.models import Group, Permission

    roles_migration = import_module("apps.evals.migrations.0002_roles")
    for name, pairs in (("viewer", roles_migration.VIEW), ("member", roles_migration.VIEW + roles_migration.MEMBER)):
        group, _ = Group.objects.get_or_create(name=name)
        group.permissions.set(
            [Permission.objects.get(content_type__app_label=app, codename=code) for app, code in pairs]
        )


ORIGIN = (b"origin", b"http://testserver")


def _session_cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


async def open_socket(path: str, user=None) -> WebsocketCommunicator:
    headers = [ORIGIN]
    if user is not None:
        cookie = await database_sync_to_async(_session_cookie)(user)
        headers.append((b"cookie", f"sessionid={cookie}".encode()))
    communicator = WebsocketCommunicator(application, path, headers=headers)
    connected, _ = await communicator.connect(timeout=60)
    assert connected
    return communicator


def is_result(frame: str) -> bool:
    """A result frame: a rendered table row (HTML) or a ``{"type": "result"}`` JSON message."""
    if frame.lstrip().startswith("{"):
        return json.loads(frame)["type"] == "result"
    return "<tr" in frame


def frame_case_id(frame: str, candidates: list[str]) -> str:
    if frame.lstrip().startswith("{"):
        return json.loads(frame)["case_id"]
    found = [c for c in candidates if f">{c}<" in frame or f'"{c}"' in frame]
    assert len(found) == 1, frame
    return found[0]


async def receive_until_close(communicator: WebsocketCommunicator, timeout: float = 60) -> tuple[list[str], int]:
    """Every text frame until the server closes, and the close code."""
    frames: list[str] = []
    while True:
        message = await communicator.receive_output(timeout=timeout)
        if message["type"] == "websocket.close":
            return frames, message.get("code", 1000)
        frames.append(message["text"])


@database_sync_to_async
def make_runs(status: str = "finished") -> EvalRun:
    eval_set = make_eval_set("live", 6)
    return make_eval_run(eval_set, [True, False, True, "errored", True, False], status=status)


@database_sync_to_async
def result_ids(eval_run: EvalRun) -> list[int]:
    return list(eval_run.results.order_by("id").values_list("id", flat=True))


@database_sync_to_async
def add_result(eval_run: EvalRun, case_id: str, passed: bool) -> EvalResult:
    from django.db.models import F
    from django.utils import timezone

    run = Run.objects.create(
        run_id=f"{eval_run.pk}:{case_id}:late", trace_id="t", started=timezone.now(), final_answer="late"
    )
    result = EvalResult.objects.create(
        eval_run=eval_run,
        case_id=case_id,
        run=run,
        passed=passed,
        status="passed" if passed else "failed",
        scores=[to_record(Score("exact_match", passed, passed=passed, explanation="compared"))],
        score=float(passed),
    )
    EvalRun.objects.filter(pk=eval_run.pk).update(n_done=F("n_done") + 1, n_passed=F("n_passed") + int(passed))
    return result


@database_sync_to_async
def set_status(eval_run: EvalRun, status: str) -> None:
    EvalRun.objects.filter(pk=eval_run.pk).update(status=status)


async def test_anonymous_is_closed_with_4403():
    eval_run = await make_runs()
    communicator = await open_socket(f"/ws/eval/runs/{eval_run.pk}/")
    frames, code = await receive_until_close(communicator)
    assert (frames, code) == ([], CLOSE_FORBIDDEN)


async def test_user_without_role_is_closed_with_4403(outsider):
    eval_run = await make_runs()
    communicator = await open_socket(f"/ws/eval/runs/{eval_run.pk}/", outsider)
    assert await receive_until_close(communicator) == ([], CLOSE_FORBIDDEN)


async def test_unknown_run_is_closed_with_4404(viewer):
    communicator = await open_socket("/ws/eval/runs/doesnotexist/", viewer)
    assert await receive_until_close(communicator) == ([], CLOSE_NOT_FOUND)


async def test_foreign_origin_is_refused(viewer):
    eval_run = await make_runs()
    communicator = WebsocketCommunicator(
        application, f"/ws/eval/runs/{eval_run.pk}/", headers=[(b"origin", b"http://evil.example")]
    )
    connected, _ = await communicator.connect(timeout=60)
    assert not connected


def live_block(frames: list[str]) -> list[str]:
    """The "latest cases" blocks among the frames (each replaces the page's block whole)."""
    return [f for f in frames if 'id="live-latest"' in f]


def row_ids(frame: str) -> list[str]:
    return re.findall(r'<tr id="(live-result-\d+)"', frame)


async def test_a_finished_run_sends_the_final_summary_and_empties_the_live_block(viewer):
    eval_run = await make_runs()
    ids = await result_ids(eval_run)
    communicator = await open_socket(f"/ws/eval/runs/{eval_run.pk}/?after={ids[2]}", viewer)
    frames, code = await receive_until_close(communicator)
    assert code == 1000
    (block,) = live_block(frames)
    assert 'hx-swap-oob="true"' in block and row_ids(block) == []  # the full table takes over
    summary = frames[-1]  # the final summary comes last: counters, header status
    assert 'id="run-summary"' in summary and 'hx-swap-oob="true"' in summary
    assert 'id="run-head-status"' in summary and ">finished<" in summary
    assert "beforeend" not in "".join(frames)  # nothing is ever appended


async def test_a_finished_run_seen_from_its_last_sequence_sends_only_the_final_frames(viewer):
    eval_run = await make_runs()
    ids = await result_ids(eval_run)
    communicator = await open_socket(f"/ws/eval/runs/{eval_run.pk}/?after={ids[-1]}", viewer)
    frames, code = await receive_until_close(communicator)
    assert code == 1000
    assert len(frames) == 2 and all(row_ids(f) == [] for f in frames)


@database_sync_to_async
def make_big_running_run(n: int) -> EvalRun:
    eval_set = make_eval_set("big-live", n)
    return make_eval_run(eval_set, [i % 3 != 0 for i in range(n)], status="running")


async def test_reconnects_with_a_stale_sequence_never_duplicate_rows(viewer):
    """rs-01: each reconnect carries the after= of the first render. The page's block is the
    newest LIVE_ROWS results, replaced whole: the same rows whatever the reconnects."""
    eval_run = await make_big_running_run(LIVE_ROWS + 15)
    ids = await result_ids(eval_run)
    newest = [f"live-result-{i}" for i in reversed(ids[-LIVE_ROWS:])]
    for _ in range(3):  # the same stale URL each time, as htmx's ws extension reconnects
        communicator = await open_socket(f"/ws/eval/runs/{eval_run.pk}/?after=0", viewer)
        first = await communicator.receive_from(timeout=5)
        assert 'id="live-latest" hx-swap-oob="true"' in first
        assert row_ids(first) == newest  # bounded, distinct, newest first
        summary = await communicator.receive_from(timeout=5)
        assert ">running<" in summary and f"{len(ids)} of {len(ids)} cases done so far" in summary
        assert await communicator.receive_nothing(timeout=0.5)  # no replay of older rows
        await communicator.disconnect()


async def test_tails_results_written_after_connect_while_the_run_is_running(viewer):
    # The tail's latency (one poll interval) is a figure for bench/, not a budget here: the
    # deadlines below only bound a broken tail, so a busy machine cannot fail the test.
    eval_run = await make_runs(status="running")
    ids = await result_ids(eval_run)
    communicator = await open_socket(f"/ws/eval/runs/{eval_run.pk}/?after={ids[-1]}", viewer)
    assert await communicator.receive_nothing(timeout=0.6)  # nothing new yet: no frames
    await add_result(eval_run, "c6", True)
    frame = await communicator.receive_from(timeout=60)  # the run is still running: only the tail sends it
    assert is_result(frame) and ">c6<" in frame.split("<tbody")[1].split("</tr>")[0]  # the newest row first
    summary = await communicator.receive_from(timeout=60)
    assert not is_result(summary) and "7 of 6 cases done so far" in summary
    await set_status(eval_run, "finished")
    frames, code = await receive_until_close(communicator)
    assert code == 1000 and len(frames) == 2 and not any(is_result(f) for f in frames)
