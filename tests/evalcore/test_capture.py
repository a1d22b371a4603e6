"""What a target prints goes to its own case's trace, bounded, never to the terminal nor to
another case's trace; the run's own output still reaches the terminal."""

from __future__ import annotations

import asyncio
import sys
import time

from evalcore.capture import LIMIT_BYTES, Captured, RoutedStream
from evalcore.runner import run_eval
from evalcore.store import InMemoryEvalStore
from evalcore.types import Case, CaseResult


def printed(store: InMemoryEvalStore, eval_run_id: str, stream: str = "stdout") -> dict[str, str]:
    """``{case id: the text its trace recorded for stream}``."""
    out = {}
    for result in store.results[eval_run_id].values():
        events = [e for e in store.events[result.run.run_id] if e.type == "message" and e.name == stream]
        if events:
            (event,) = events
            out[result.case_id] = event.payload["content"]
    return out


class PrintingSink(InMemoryEvalStore):
    """Prints a line per result, from the runner's own context (as the CLI's progress does)."""

    def on_result(self, result: CaseResult) -> None:
        super().on_result(result)
        print(f"stored {result.case_id}")


async def test_concurrent_async_cases_each_keep_their_own_prints(capsys):
    async def chatty(x):
        for line in range(3):
            print(f"case {x} line {line}")
            await asyncio.sleep(0)  # let the other cases print in between
        print(f"case {x} warning", file=sys.stderr)
        return x

    store = PrintingSink()
    await run_eval([Case(f"c{i}", i, i) for i in range(8)], chatty, ["exact_match"], sink=store, eval_run_id="r")
    assert printed(store, "r") == {f"c{i}": "".join(f"case {i} line {n}\n" for n in range(3)) for i in range(8)}
    assert printed(store, "r", "stderr") == {f"c{i}": f"case {i} warning\n" for i in range(8)}
    terminal = capsys.readouterr()
    assert "line" not in terminal.out and "warning" not in terminal.err
    assert sorted(terminal.out.splitlines()) == sorted(f"stored c{i}" for i in range(8))
    assert sys.stdout is not None and not isinstance(sys.stdout, RoutedStream)  # put back


async def test_cases_on_worker_threads_keep_their_own_prints():
    def blocking(x):
        for line in range(3):
            print(f"thread case {x} line {line}")
            time.sleep(0.001)
        return x

    store = InMemoryEvalStore()
    await run_eval([Case(f"c{i}", i, i) for i in range(6)], blocking, [], sink=store, eval_run_id="t", concurrency=6)
    assert printed(store, "t") == {f"c{i}": "".join(f"thread case {i} line {n}\n" for n in range(3)) for i in range(6)}


async def test_a_flood_is_kept_up_to_the_limit_with_a_marker():
    def flood(x):
        for _ in range(1000):
            print("é" * 99)  # 199 bytes a line
        return x

    store = InMemoryEvalStore()
    await run_eval([Case("c", 1, 1)], flood, [], sink=store, eval_run_id="f")
    (result,) = store.results["f"].values()
    (event,) = [e for e in store.events[result.run.run_id] if e.name == "stdout"]
    total = 1000 * (2 * 99 + 1)
    assert (event.payload["bytes"], event.payload["truncated"]) == (total, True)
    kept, marker = event.payload["content"].rsplit("\n", 1)
    assert marker == f"… truncated at {LIMIT_BYTES} bytes ({total - len(kept.encode())} more bytes not kept)"
    assert LIMIT_BYTES - 1 <= len(kept.encode()) <= LIMIT_BYTES  # cut on a character boundary


async def test_a_silent_target_records_nothing():
    store = InMemoryEvalStore()
    await run_eval([Case("c", 1, 1)], lambda x: x, [], sink=store, eval_run_id="s")
    assert printed(store, "s") == {} and printed(store, "s", "stderr") == {}


def test_captured_counts_everything_and_cuts_on_a_character():
    captured = Captured(limit=5)
    captured.write("ab")
    captured.write("cdé")  # é is 2 bytes: only "cd" fits after "ab" with 1 byte left
    captured.write("more")
    assert captured.total == 10 and captured.truncated
    assert captured.text() == "abcd\n… truncated at 5 bytes (6 more bytes not kept)"
