"""Live progress of one eval run over a websocket: ``/ws/eval/runs/<id>/?after=<seq>``.

connect -> check access (close 4403) and the run (close 4404) -> replay the results with
``id > after`` (``EvalResult.id`` is the sequence; the page is rendered with its high-water
mark) -> keep tailing the database every ``POLL_S`` -> once the run is over and everything is
sent, send the final summary and close (code 1000: htmx's ws extension does not reconnect).

Tailing the database is what makes runs started elsewhere visible: the CLI or the task worker
write results from another process, and with the embedded default there is no Redis. With a
Redis channel layer configured the consumer also joins the group ``eval-run.<id>``; a
publisher (:func:`notify_eval_run`) only wakes the tail early, the database stays the source.

Messages are the HTML partials the run page renders itself, swapped out-of-band by htmx's ws
extension: ``evals/run_detail.html#live_latest`` (the latest :data:`LIVE_ROWS` results, the
whole block replaced, so the page's DOM stays bounded and a reconnect can never duplicate a
row; emptied once the run is over) and ``#summary`` with ``oob`` (the counters, the header's
status and the table footer replaced in place). The cursor then jumps to the newest result: a
page needs no replay of what it will never show. While a conversation case plays, ``evals/_live_turns.html``
(the cases in flight with their turns done / total, :func:`~apps.evals.queries.conversations.playing_turns`,
read from the ``turn`` spans the writer already commits) is sent whenever it changes.

The result store does not import this module: it sends :data:`apps.evals.events.results_written`,
which :func:`on_results_written` receives (connected in ``EvalsConfig.ready``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from channels.layers import get_channel_layer
from django.conf import settings
from django.template.loader import render_to_string

from apps.core import access
from apps.evals.models import EvalResult, EvalRun, EvalRunStatus
from apps.evals.queries.conversations import PlayingCase, playing_turns

log = logging.getLogger(__name__)

POLL_S = 0.25
"""Seconds between database polls while a run is going (the update latency budget is 1 s)."""

BATCH = 200
"""Results sent per poll at most, so a replay of a large run never loads it whole."""

LIVE_ROWS = 20
"""Rows of the live run page's "latest cases" block (the page's DOM stays this size)."""

CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404
LIVE_STATUSES = (EvalRunStatus.QUEUED, EvalRunStatus.RUNNING)


def group_name(eval_run_id: str) -> str:
    """The channel-layer group of a run (letters, digits, periods, hyphens only)."""
    return f"eval-run.{eval_run_id}"


def redis_layer_configured() -> bool:
    """True when the channel layer reaches other processes (Redis), not only this one."""
    backend = str(getattr(settings, "CHANNEL_LAYERS", {}).get("default", {}).get("BACKEND", ""))
    return "redis" in backend.lower()


def notify_eval_run(eval_run_id: str) -> None:
    """Wake the sockets watching a run now (call after the commit that wrote its results).

    A no-op without a Redis channel layer: the sockets' database tail picks the rows up anyway.
    The push is handed to this process's publisher loop (:func:`publisher_loop`) and not
    waited for, so a result writer never blocks on Redis, and the layer keeps one connection
    instead of opening one per push; a failed push is logged (the tail still delivers).
    """
    if not redis_layer_configured():
        return
    layer = get_channel_layer()
    if layer is not None:
        send = layer.group_send(group_name(eval_run_id), {"type": "eval.progress"})
        asyncio.run_coroutine_threadsafe(send, publisher_loop()).add_done_callback(_log_failed_push)


_publisher: tuple[int, asyncio.AbstractEventLoop] | None = None
_publisher_lock = threading.Lock()


def publisher_loop() -> asyncio.AbstractEventLoop:
    """This process's event loop for channel-layer pushes, on a daemon thread of its own
    (started on first use, and again in a forked child: the parent's thread is not there)."""
    global _publisher
    with _publisher_lock:
        if _publisher is None or _publisher[0] != os.getpid():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="evalsite-channel-publisher", daemon=True).start()
            _publisher = (os.getpid(), loop)
        return _publisher[1]


def _log_failed_push(future: Any) -> None:
    error = future.exception()
    if error is not None:  # a push is an optimisation; the database tail still delivers
        if isinstance(error, ConnectionError | OSError) or type(error).__module__.startswith("redis."):
            # Redis is down: one line (the worker says so too), not a traceback per push
            log.warning("could not notify live pages through the channel layer: %s", error)
        else:
            log.warning("could not notify live pages through the channel layer", exc_info=error)


def on_results_written(sender: Any, *, eval_run_id: str, **kwargs: Any) -> None:
    """Receiver of :data:`apps.evals.events.results_written`: wake that run's sockets."""
    notify_eval_run(eval_run_id)


@dataclass(slots=True)
class Poll:
    """One database read: the run's state (read first) and the results after the cursor;
    ``playing``: the conversation cases in flight with their turns done (empty once the run ended)."""

    run: EvalRun
    results: list[EvalResult]
    latest: list[EvalResult] | None = None
    playing: list[PlayingCase] = field(default_factory=list)


def fetch_after(eval_run_id: str, after: int, limit: int = BATCH, latest: int = 0) -> Poll | None:
    """The run and up to ``limit`` of its results with ``id > after``; ``None`` if the run is gone.

    With ``latest``, also the run's newest ``latest`` results (newest first) when anything new
    arrived: the live page's bounded block.

    The run is read before the results: a run seen finished here had all its results committed
    (the store flushes before marking it finished), so an empty batch then means "all sent".
    """
    run = EvalRun.objects.select_related("eval_set").filter(pk=eval_run_id).first()
    if run is None:
        return None
    results = list(
        EvalResult.objects.filter(eval_run_id=eval_run_id, id__gt=after).select_related("run").order_by("id")[:limit]
    )
    newest = None
    if latest and results:
        newest = list(EvalResult.objects.filter(eval_run_id=eval_run_id).select_related("run").order_by("-id")[:latest])
    playing = playing_turns(run) if run.status in LIVE_STATUSES else []
    return Poll(run, results, newest, playing)


LATEST_TEMPLATE = "evals/run_detail.html#live_latest"
TURNS_TEMPLATE = "evals/_live_turns.html"
SUMMARY_TEMPLATE = "evals/run_detail.html#summary"


def render_turns(poll: Poll) -> str:
    """The frame of the conversations being played (replaces the page's block, ``hx-swap-oob``)."""
    return render_to_string(TURNS_TEMPLATE, {"playing": poll.playing, "oob": True})


def render_messages(poll: Poll, *, final: bool) -> list[str]:
    """The text frames for one poll (when anything changed): the run page's partials, each
    carrying ``hx-swap-oob``: the latest-results block (empty once ``final``), then the summary."""
    frames: list[str] = []
    if poll.results or final:
        context = {"eval_run": poll.run, "latest": poll.latest or [], "live_rows": LIVE_ROWS}
        frames.append(render_to_string(LATEST_TEMPLATE, {**context, "oob": True, "final": final}))
    frames.append(render_to_string(SUMMARY_TEMPLATE, {"eval_run": poll.run, "oob": True, "final": final}))
    return frames


class EvalRunConsumer(AsyncWebsocketConsumer):  # type: ignore[misc]  # channels has no type hints
    """Streams one eval run's new results and counters to a page (see the module docstring)."""

    poll_s: float = POLL_S

    async def connect(self) -> None:
        self.eval_run_id = str(self.scope["url_route"]["kwargs"]["run_id"])
        self.cursor = _after(self.scope.get("query_string", b""))
        self.tail_task: asyncio.Task[None] | None = None
        self.joined = False
        # what the page shows of the conversations playing: none, or (``turns=1``) some not known here
        self.playing_sent: list[PlayingCase] | None = (
            None if _flag(self.scope.get("query_string", b""), "turns") else []
        )
        self.wake = asyncio.Event()
        # Accept first: a close before accepting is an HTTP 403 and the client never sees the
        # 44xx code that says why.
        await self.accept()
        if not await database_sync_to_async(access.can_view)(self.scope.get("user")):
            await self.close(code=CLOSE_FORBIDDEN)
            return
        exists = await database_sync_to_async(EvalRun.objects.filter(pk=self.eval_run_id).exists)()
        if not exists:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        if redis_layer_configured() and self.channel_layer is not None:
            await self.channel_layer.group_add(group_name(self.eval_run_id), self.channel_name)
            self.joined = True
        self.tail_task = asyncio.create_task(self._tail())

    async def disconnect(self, code: int) -> None:
        task = getattr(self, "tail_task", None)
        if task is not None and task is not asyncio.current_task():
            task.cancel()
        if getattr(self, "joined", False):
            await self.channel_layer.group_discard(group_name(self.eval_run_id), self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        # The page sends nothing we act on; ignoring input keeps the protocol one-way.
        return None

    async def eval_progress(self, event: dict[str, Any]) -> None:
        """Group message ``{"type": "eval.progress"}``: poll now instead of at the next tick."""
        self.wake.set()

    async def _tail(self) -> None:
        try:
            while True:
                poll = await database_sync_to_async(fetch_after)(self.eval_run_id, self.cursor, latest=LIVE_ROWS)
                if poll is None:
                    await self.close(code=CLOSE_NOT_FOUND)
                    return
                final = poll.run.status not in LIVE_STATUSES and len(poll.results) < BATCH
                if poll.playing != self.playing_sent:  # a conversation's turn finished (or its case did)
                    await self.send(text_data=await database_sync_to_async(render_turns)(poll))
                    self.playing_sent = poll.playing
                if poll.results or final:
                    frames = await database_sync_to_async(render_messages)(poll, final=final)
                    for frame in frames:
                        await self.send(text_data=frame)
                    if poll.results:
                        self.cursor = poll.results[-1].pk
                    if poll.latest:  # the page shows only the newest: no replay of older rows
                        self.cursor = max(self.cursor, poll.latest[0].pk)
                if final:
                    await self.close(code=1000)
                    return
                self.wake.clear()
                try:
                    await asyncio.wait_for(self.wake.wait(), timeout=self.poll_s)
                except TimeoutError:
                    pass
        except asyncio.CancelledError:
            raise
        except Exception:  # a broken tail must close the socket, not hang it
            log.exception("live progress of eval run %s failed", self.eval_run_id)
            await self.close(code=1011)


def _flag(query_string: bytes, name: str) -> bool:
    return (parse_qs(query_string.decode("latin-1")).get(name) or ["0"])[0] == "1"


def _after(query_string: bytes) -> int:
    values = parse_qs(query_string.decode("latin-1")).get("after") or ["0"]
    try:
        return max(0, int(values[0]))
    except ValueError:
        return 0
