"""The export routes of the evals API, mounted beside ``apps.evals.api.runs`` (viewers read):

``GET /api/eval/runs/{id}/export?format=jsonl|csv|parquet``,
``GET /api/eval/runs/{id}/review-queue/export?format=jsonl|csv|parquet&filter=all``,
``GET /api/eval/sets/{id}/review-queue/export?format=&filter=&runs=latest|all|RUN_ID`` (a set's queue across runs),
``GET /api/eval/compare/export?a=&b=&format=`` and ``GET /api/eval/sets/{id}/export?format=jsonl|csv|parquet|adk``.

Each answers a streamed attachment (:func:`streamed`): rows are read and written a chunk at a
time, so memory stays flat however large the run. The pages' export buttons link here. Traces a
caller may not read (a private playground run) are left out, as in the run detail route.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, StreamingHttpResponse
from django.utils.http import content_disposition_header
from ninja import Router

from apps.evals.api.common import ERRORS, api_user, get_or_404, require_view
from apps.evals.exports.downloads import (
    Download,
    compare_download,
    queue_download,
    run_download,
    set_download,
    set_queue_download,
)
from apps.evals.models import EvalRun, EvalSet
from apps.traces.access import run_visibility

router = Router(tags=["exports"])


def _next_chunk(chunks: Iterator[bytes]) -> bytes | None:
    return next(chunks, None)


async def _pulled(chunks: Iterator[bytes]) -> AsyncIterator[bytes]:
    """The chunks pulled one at a time on Django's sync thread (they read the database)."""
    pull = sync_to_async(_next_chunk, thread_sensitive=True)
    while True:
        chunk = await pull(chunks)
        if chunk is None:
            return
        yield chunk


def streamed(request: HttpRequest, download: Download) -> StreamingHttpResponse:
    """``download`` as an attachment, streamed.

    Under ASGI (``evalsite serve``) the body is an async iterator pulling each chunk on the sync
    thread: Django would otherwise read a sync iterator whole into memory before sending it.
    """
    body: Iterator[bytes] | AsyncIterator[bytes] = download.chunks
    if isinstance(request, ASGIRequest):
        body = _pulled(download.chunks)
    response = StreamingHttpResponse(body, content_type=download.content_type)
    response["Content-Disposition"] = content_disposition_header(True, download.filename)
    response["X-Content-Type-Options"] = "nosniff"
    return response


def _runs() -> Any:
    return EvalRun.objects.select_related("eval_set")


@router.get("/runs/{run_id}/export", response=ERRORS, summary="Export a run: cases, outputs, scores, reviews")
def export_run(request: HttpRequest, run_id: str, format: str = "jsonl") -> Any:
    require_view(request)
    eval_run = get_or_404(_runs(), "run_id", pk=run_id)
    return streamed(request, run_download(eval_run, format, visible=run_visibility(api_user(request), "run__")))


@router.get(
    "/runs/{run_id}/review-queue/export",
    response=ERRORS,
    summary="Export a run's review queue (queue order, reasons, reviews)",
)
def export_review_queue(
    request: HttpRequest,
    run_id: str,
    format: str = "jsonl",
    filter: str = "all",
) -> Any:
    user = require_view(request)
    eval_run = get_or_404(_runs(), "run_id", pk=run_id)
    download = queue_download(eval_run, format, user=user, queue_filter=filter, visible=run_visibility(user, "run__"))
    return streamed(request, download)


@router.get(
    "/sets/{set_id}/review-queue/export",
    response=ERRORS,
    summary="Export a set's review queue across its runs (queue order, runs, reasons, reviews)",
)
def export_set_review_queue(
    request: HttpRequest,
    set_id: int,
    format: str = "jsonl",
    filter: str = "all",
    runs: str = "latest",
) -> Any:
    user = require_view(request)
    eval_set = get_or_404(EvalSet, "set_id", pk=set_id)
    visible = run_visibility(user, "run__")
    download = set_queue_download(eval_set, format, runs=runs, user=user, queue_filter=filter, visible=visible)
    return streamed(request, download)


@router.get("/compare/export", response=ERRORS, summary="Export two runs aligned per case, with the flip kind")
def export_comparison(request: HttpRequest, a: str, b: str, format: str = "jsonl") -> Any:
    user = require_view(request)
    run_a = get_or_404(_runs(), "a", pk=a)
    run_b = get_or_404(_runs(), "b", pk=b)
    return streamed(request, compare_download(run_a, run_b, format, visible=run_visibility(user, "run__")))


@router.get(
    "/sets/{set_id}/export", response=ERRORS, summary="Export a set's cases (JSONL, CSV, Parquet, ADK eval set)"
)
def export_set(request: HttpRequest, set_id: int, format: str = "jsonl") -> Any:
    require_view(request)
    eval_set = get_or_404(EvalSet, "set_id", pk=set_id)
    return streamed(request, set_download(eval_set, format))
