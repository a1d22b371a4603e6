"""The metric-library worker: runs Ragas, DeepEval and autoevals metrics for Evalsite's scorers.

This file runs as a script (``python worker.py``) in whichever Python has the library installed,
often a virtualenv of its own (Ragas and DeepEval pin ``openai`` and ``rich`` below what Evalsite
uses, so they may not share its environment). It imports only the standard library at start; a
library is imported on the first request that names it. It must not import ``evalcore``: the
Python it runs in may not have Evalsite.

Protocol: one JSON object per line on stdin, one per line on stdout.

* Start: the worker writes ``{"ready": true, "python": "3.12.1", "versions": {"ragas": "0.4.3", ...}}``
  (the metric libraries installed in its Python).
* Request: ``{"id": int, "library": "ragas" | "deepeval" | "autoevals", "metric": str,
  "options": {...}, "fields": {"question", "answer", "reference", "contexts"}, "judge":
  {"base_url", "model", "api_key", "temperature", "seed", "timeout_s"}}``.
* Answer: ``{"id", "ok": true, "value": float | null, "reason": str | null, "library_version",
  "usage": {"calls", "tokens_in", "tokens_out"}, "connections": [[host, port], ...], "blocked":
  [[host, port], ...]}`` or ``{"id", "ok": false,
  "kind": "library_error" | "not_installed" | "bad_request", "error": str, ...}``. ``value``
  is what the library returned; judging it (NaN, out of range) is the caller's business.
  ``connections`` / ``blocked`` are the network connections attempted since the previous answer.

No network except the judge: before any library is imported, the libraries' telemetry is turned
off through their own switches (``RAGAS_DO_NOT_TRACK``, ``DEEPEVAL_TELEMETRY_OPT_OUT``, LangSmith
tracing, Hugging Face offline mode; DeepEval's ``.env`` loading too), and an audit hook
(:func:`sys.addaudithook`, events ``socket.connect`` and ``socket.getaddrinfo``) refuses any
connection or name lookup of a host other than the judge endpoints named by requests (a refused
one raises ``PermissionError`` inside the library and is reported in ``blocked``).

Requests run concurrently (each is an asyncio task); every library's async API is used.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import json
import math
import os
import sys
import threading
import traceback
from typing import Any
from urllib.parse import urlsplit

# The libraries' own switches, set before any of them is imported (they read them at import).
QUIET_ENV = {
    "RAGAS_DO_NOT_TRACK": "true",
    "DEEPEVAL_TELEMETRY_OPT_OUT": "1",
    "DEEPEVAL_DISABLE_DOTENV": "1",
    "DEEPEVAL_UPDATE_WARNING_OPT_IN": "0",
    "DEEPEVAL_GRPC_LOGGING": "0",
    "DEEPEVAL_EVAL_MODE": "llm",
    "DEEPEVAL_DISABLE_LEGACY_KEYFILE": "1",
    "DEEPEVAL_RESULTS_FOLDER": "",
    "CONFIDENT_TRACE_FLUSH": "0",
    "ERROR_REPORTING": "0",
    "LANGCHAIN_TRACING_V2": "false",
    "LANGSMITH_TRACING": "false",
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "POSTHOG_DISABLED": "1",
    "DO_NOT_TRACK": "1",
}

_allowed_hosts: set[str] = set()
_seen: list[tuple[str, int]] = []
_blocked: list[tuple[str, int]] = []
_guard_lock = threading.Lock()


def _audit(event: str, args: tuple[Any, ...]) -> None:
    """Refuse a connection or lookup of any host but a judge endpoint's (see the module doc)."""
    if event == "socket.connect":
        address = args[1]
        if not (isinstance(address, tuple) and len(address) >= 2):
            return  # a Unix socket: no network
        host, port = str(address[0]), int(address[1])
    elif event == "socket.getaddrinfo":
        host, port = str(args[0]), int(args[1]) if isinstance(args[1], int) else 0
        if host in _allowed_hosts:
            return  # the lookup of the judge's own host (its connection is recorded)
    else:
        return
    with _guard_lock:
        if host in _allowed_hosts:
            if event == "socket.connect":
                _seen.append((host, port))
            return
        _blocked.append((host, port))
    raise PermissionError(f"the Evalsite metric worker allows no connection but the judge's: {host}:{port}")


def _allow(base_url: str) -> None:
    host = urlsplit(base_url).hostname or ""
    with _guard_lock:
        _allowed_hosts.add(host)
        if host == "localhost":
            _allowed_hosts.update({"127.0.0.1", "::1"})


def _drain() -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    with _guard_lock:
        seen, blocked = list(_seen), list(_blocked)
        _seen.clear()
        _blocked.clear()
    return seen, blocked


_usage: contextvars.ContextVar[dict[str, int] | None] = contextvars.ContextVar("judge_usage", default=None)
"""The judge calls and tokens of the request being run (each request is a task with its own)."""
_counting = False


def _count_judge_calls() -> None:
    """Wrap ``httpx.AsyncClient.send`` once: every chat-completions call a request's library makes
    adds 1 to its ``calls`` and the answer's ``usage`` to its tokens (the libraries' own counts
    differ per library, or are missing)."""
    global _counting
    if _counting:
        return
    import httpx

    original = httpx.AsyncClient.send

    async def send(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        response = await original(self, request, *args, **kwargs)
        usage = _usage.get()
        if usage is not None and str(request.url.path).endswith("/chat/completions"):
            usage["calls"] += 1
            try:
                await response.aread()
                reported = response.json().get("usage") or {}
                usage["tokens_in"] += int(reported.get("prompt_tokens") or 0)
                usage["tokens_out"] += int(reported.get("completion_tokens") or 0)
            except Exception:  # noqa: BLE001 - a body without usage counts the call alone
                pass
        return response

    httpx.AsyncClient.send = send
    _counting = True


class BadRequest(Exception):
    """A request this worker cannot run (unknown metric, missing field): the caller's mistake."""


def _snake(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum())


def _find_class(module: Any, metric: str, suffixes: tuple[str, ...] = ("",)) -> Any:
    """The class of ``module`` whose name matches ``metric`` ignoring case, ``_`` and a suffix."""
    wanted = _snake(metric)
    for attr in dir(module):
        value = getattr(module, attr)
        if not inspect.isclass(value):
            continue
        for suffix in suffixes:
            if _snake(attr) == wanted + _snake(suffix):
                return value
    raise BadRequest(f"{module.__name__} has no metric {metric!r}")


def _openai_client(judge: dict[str, Any]) -> Any:
    from openai import AsyncOpenAI

    return AsyncOpenAI(
        base_url=judge["base_url"], api_key=judge.get("api_key") or "no-key", timeout=judge.get("timeout_s") or 120.0
    )


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


def _reasons_of(value: Any, out: list[str]) -> None:
    """Collect ``reason`` texts from a library's structured judge answers (pydantic objects)."""
    if isinstance(value, list | tuple):
        for item in value:
            _reasons_of(item, out)
        return
    data = getattr(value, "__dict__", None)
    if not isinstance(data, dict):
        return
    reason = data.get("reason")
    if isinstance(reason, str) and reason.strip():
        head = data.get("statement")
        verdict = data.get("verdict")
        label = f"{head}: " if isinstance(head, str) else ""
        tail = f" (verdict {verdict})" if verdict is not None else ""
        out.append(f"{label}{reason.strip()}{tail}")
    for item in data.values():
        if isinstance(item, list | tuple):
            _reasons_of(item, out)


async def _ragas(metric: str, options: dict[str, Any], fields: dict[str, Any], judge: dict[str, Any]) -> dict[str, Any]:
    import ragas
    import ragas.metrics.collections as collections
    from ragas.llms import llm_factory

    extra = {k: judge[k] for k in ("temperature", "seed") if judge.get(k) is not None}
    llm = llm_factory(judge["model"], client=_openai_client(judge), **extra)
    answers: list[Any] = []
    generate = llm.agenerate

    async def recording(*args: Any, **kwargs: Any) -> Any:
        result = await generate(*args, **kwargs)
        answers.append(result)
        return result

    llm.agenerate = recording
    cls = _find_class(collections, metric)
    scorer = cls(llm=llm, **options)
    given = {
        "user_input": fields.get("question"),
        "response": fields.get("answer"),
        "reference": fields.get("reference"),
        "retrieved_contexts": fields.get("contexts"),
    }
    params = inspect.signature(scorer.ascore).parameters
    kwargs = {name: given[name] for name in params if name in given and given[name] is not None}
    result = await scorer.ascore(**kwargs)
    reasons: list[str] = []
    _reasons_of(answers, reasons)
    reason = getattr(result, "reason", None) or ("\n".join(reasons) if reasons else None)
    return {"value": _number(getattr(result, "value", result)), "reason": reason, "library_version": ragas.__version__}


async def _deepeval(
    metric: str, options: dict[str, Any], fields: dict[str, Any], judge: dict[str, Any]
) -> dict[str, Any]:
    import deepeval
    import deepeval.metrics as metrics
    from deepeval.models import LocalModel
    from deepeval.test_case import LLMTestCase

    generation = {"seed": judge["seed"]} if judge.get("seed") is not None else {}
    model = LocalModel(
        model=judge["model"],
        base_url=judge["base_url"],
        api_key=judge.get("api_key") or "no-key",
        temperature=judge.get("temperature") or 0.0,
        generation_kwargs=generation,
    )
    cls = _find_class(metrics, metric, ("", "Metric"))
    options = dict(options)
    if "evaluation_params" in options:
        from deepeval.test_case import SingleTurnParams

        options["evaluation_params"] = [SingleTurnParams(p) for p in options["evaluation_params"]]
    if cls.__name__ == "GEval":
        options.setdefault("name", "GEval")
    scorer = cls(model=model, async_mode=True, **options)
    contexts = fields.get("contexts")
    case = LLMTestCase(
        input=fields.get("question") or "",
        actual_output=fields.get("answer"),
        expected_output=fields.get("reference"),
        retrieval_context=contexts,
        context=contexts,
    )
    await scorer.a_measure(case, _show_indicator=False)
    if getattr(scorer, "error", None):
        raise RuntimeError(str(scorer.error))
    return {"value": _number(scorer.score), "reason": scorer.reason, "library_version": deepeval.__version__}


async def _autoevals(
    metric: str, options: dict[str, Any], fields: dict[str, Any], judge: dict[str, Any]
) -> dict[str, Any]:
    import autoevals
    import autoevals.llm as llm

    cls = _find_class(llm, metric)
    build = {k: options.pop(k) for k in ("use_cot", "max_tokens") if k in options}
    scorer = cls(model=judge["model"], client=_openai_client(judge), temperature=judge.get("temperature"), **build)
    kwargs = dict(options)
    if fields.get("question") is not None:
        kwargs["input"] = fields["question"]
    score = await scorer.eval_async(fields.get("answer"), fields.get("reference"), **kwargs)
    metadata = getattr(score, "metadata", None) or {}
    reason = metadata.get("rationale")
    if metadata.get("choice") is not None:
        reason = f"choice {metadata['choice']}" + (f": {reason}" if reason else "")
    version = getattr(getattr(autoevals, "version", None), "VERSION", None)
    if version is None:
        from importlib.metadata import version as dist_version

        version = dist_version("autoevals")
    return {"value": _number(score.score), "reason": reason, "library_version": version}


RUNNERS = {"ragas": _ragas, "deepeval": _deepeval, "autoevals": _autoevals}


def _number(value: Any) -> float | None:
    """The library's value as a float (``None`` stays ``None``; NaN is passed on as ``None`` + flag)."""
    if value is None or isinstance(value, bool):
        return None if value is None else float(value)
    return float(value)


async def handle(request: dict[str, Any]) -> dict[str, Any]:
    """Run one request; never raises (every failure is an answer with ``ok: false``)."""
    answer: dict[str, Any] = {"id": request.get("id")}
    try:
        library = request.get("library")
        runner = RUNNERS.get(str(library))
        if runner is None:
            raise BadRequest(f"unknown library {library!r} (known: {', '.join(sorted(RUNNERS))})")
        judge = request.get("judge") or {}
        if not judge.get("base_url") or not judge.get("model"):
            raise BadRequest("the request names no judge endpoint (base_url and model)")
        _allow(judge["base_url"])
        _count_judge_calls()
        usage = {"calls": 0, "tokens_in": 0, "tokens_out": 0}
        answer["usage"] = usage
        _usage.set(usage)  # this task's own context: concurrent requests count apart
        try:
            result = await runner(str(request["metric"]), dict(request.get("options") or {}), request["fields"], judge)
        except ImportError as exc:
            if getattr(exc, "name", None) and str(exc.name).split(".")[0] == library:
                answer.update(ok=False, kind="not_installed", error=f"{library} is not installed in {sys.executable}")
                return answer
            raise
        value = result["value"]
        if value is not None and not math.isfinite(value):
            result["value"] = None
            result["non_finite"] = repr(value)
        answer.update(ok=True, **result)
    except BadRequest as exc:
        answer.update(ok=False, kind="bad_request", error=str(exc))
    except Exception as exc:  # noqa: BLE001 - a library failure is an answer, never a dead worker
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        answer.update(ok=False, kind="library_error", error=detail)
    finally:
        seen, blocked = _drain()
        answer["connections"], answer["blocked"] = seen, blocked
    return answer


def installed_versions() -> dict[str, str]:
    """The metric libraries installed in this Python, name -> version (read without importing them)."""
    from importlib.metadata import PackageNotFoundError, version

    found: dict[str, str] = {}
    for name in RUNNERS:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            pass
    return found


async def serve(out: Any) -> None:
    """Read requests from stdin until it closes; answer each on ``out`` as it finishes."""
    loop = asyncio.get_running_loop()
    tasks: set[asyncio.Task[None]] = set()

    def write(answer: dict[str, Any]) -> None:
        out.write(json.dumps(answer, default=str) + "\n")
        out.flush()

    async def one(request: dict[str, Any]) -> None:
        write(await handle(request))

    write({"ready": True, "python": sys.version.split()[0], "versions": installed_versions()})
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line:
            break
        try:
            request = json.loads(line)
        except json.JSONDecodeError as exc:
            write({"id": None, "ok": False, "kind": "bad_request", "error": str(exc)})
            continue
        task = asyncio.create_task(one(request))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    if tasks:
        await asyncio.gather(*tasks)


def main() -> None:
    """Set the quiet environment and the network guard, then serve."""
    os.environ.update(QUIET_ENV)
    # the answers get a private copy of stdout; whatever a library prints goes to stderr instead
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    sys.addaudithook(_audit)
    asyncio.run(serve(out))


if __name__ == "__main__":
    main()
