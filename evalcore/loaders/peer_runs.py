"""Other tools' past runs read into one shape: promptfoo results, OpenAI Evals exports, Braintrust
experiments (``evalsite import-run``; Inspect logs have their own reader, :mod:`.inspect_log`).

:func:`read_peer_runs` detects the format from the content (never the file name), reads the file
(or a folder of files, for an OpenAI Evals export) whole and returns a
:class:`~evalcore.loaders._peer.PeerFile`: the cases the file defines and one ``PeerRun`` per run
it holds, each with one ``PeerItem`` per case answered, each item with the tool's own scores
(``PeerScore``). Pure parsing: nothing is written, no Django, no network.

Every problem is a :class:`~evalcore.loaders.errors.CaseBankError` naming the file, the JSON
path (``results.results[3].gradingResult.componentResults[1]``, or a line for JSONL/CSV) and the
field.

The readers: :mod:`evalcore.loaders.promptfoo_results`, :mod:`evalcore.loaders.openai_evals_runs`,
:mod:`evalcore.loaders.braintrust_experiments`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from evalcore.loaders import braintrust_experiments, openai_evals_runs, promptfoo_results
from evalcore.loaders._peer import PeerCase, PeerFile, PeerItem, PeerRun, PeerScore, file_sha256
from evalcore.loaders.errors import CaseBankError

__all__ = ["PeerCase", "PeerFile", "PeerItem", "PeerRun", "PeerScore", "detect_peer_format", "read_peer_runs"]

_LOOKS: tuple[tuple[str, Callable[[str], bool]], ...] = (
    ("promptfoo", promptfoo_results.looks_like),
    ("openai_evals", openai_evals_runs.looks_like),
    ("braintrust", braintrust_experiments.looks_like),
)
_READERS: dict[str, Callable[[Path, str, str], PeerFile]] = {
    "promptfoo": promptfoo_results.read,
    "openai_evals": openai_evals_runs.read,
    "braintrust": braintrust_experiments.read,
}


def detect_peer_format(path: str | Path) -> str | None:
    """Which reader takes this file or folder, from its content: ``promptfoo``,
    ``openai_evals``, ``braintrust``, or ``None`` (not one of these: an Inspect log, a case bank...).

    Reads at most the first 64 KiB of a file (a folder: of each ``.json`` / ``.jsonl`` file in it).
    """
    target = Path(path)
    heads = []
    if target.is_dir():
        heads = [_head(p) for p in sorted(target.iterdir()) if p.is_file() and p.suffix in (".json", ".jsonl")]
    elif target.is_file():
        heads = [_head(target)]
    for head in heads:
        for name, looks in _LOOKS:
            if looks(head):
                return name
    return None


def _head(path: Path) -> str:
    try:
        with path.open("rb") as handle:
            return handle.read(65536).decode("utf-8-sig", errors="replace")
    except OSError:
        return ""


def read_peer_runs(path: str | Path) -> PeerFile:
    """Read another tool's results file or export folder (see the module doc).

    Raises:
        CaseBankError: Not a format read here, or a bad / partial file (file, JSON path, field).
    """
    target = Path(path)
    display = str(path)
    if not target.exists():
        raise CaseBankError("no such file or folder", path=display)
    kind = detect_peer_format(target)
    if kind is None:
        raise CaseBankError(
            "not a results file read here: expected a promptfoo results file (JSON with results.version, JSONL or "
            "CSV from promptfoo eval -o), an OpenAI Evals export (eval / eval.run / eval.run.output_item objects) "
            "or a Braintrust experiment (events with experiment_id and root_span_id)",
            path=display,
        )
    return _READERS[kind](target, display, file_sha256(target))
