"""Evalsite's eval engine: framework-free (no Django import, ever).

Usable from a notebook or plain pytest::

    from evalcore import Case, run_eval
    report = asyncio.run(run_eval([Case("q1", "2+2", "4")], lambda q: "4", ["exact_match"]))
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from evalcore._util.lazy import lazy_exports

# Names are imported on first use (PEP 562): ``import evalcore.redact`` (the logging filter every
# process installs) or a command that only runs an eval does not load the loaders, the judge and
# every scorer just because this package's namespace offers them.
_EXPORTS: dict[str, str] = {
    "Case": "evalcore.types",
    "CaseBankError": "evalcore.loaders",
    "CaseResult": "evalcore.types",
    "CaseStatus": "evalcore.types",
    "ErrorInfo": "evalcore.types",
    "EvalReport": "evalcore.report",
    "EvalRunInfo": "evalcore.store",
    "EvalSink": "evalcore.store",
    "EvalStore": "evalcore.store",
    "HeldOutError": "evalcore.splits",
    "InMemoryEvalStore": "evalcore.store",
    "LoadedCaseBank": "evalcore.loaders",
    "MISSING": "evalcore.jsonvalue",
    "MetricSummary": "evalcore.report",
    "MultiSink": "evalcore.store",
    "Node": "evalcore.targets",
    "Pipeline": "evalcore.targets",
    "ReportBuilder": "evalcore.report",
    "RunContext": "evalcore.targets",
    "RunRecord": "evalcore.types",
    "SPLITS": "evalcore.types",
    "Score": "evalcore.types",
    "ScoreContext": "evalcore.scorers",
    "Scorer": "evalcore.scorers",
    "ScorerSpec": "evalcore.scorers",
    "TargetOutput": "evalcore.types",
    "TargetSpec": "evalcore.discovery",
    "TraceEvent": "evalcore.tracing",
    "Tracer": "evalcore.tracing",
    "as_agent": "evalcore.targets",
    "assign_split": "evalcore.splits",
    "discover_targets": "evalcore.discovery",
    "guard_split": "evalcore.splits",
    "load_cases": "evalcore.loaders",
    "rescore": "evalcore.runner",
    "resolve_target": "evalcore.targets",
    "run_case": "evalcore.inference",
    "run_eval": "evalcore.runner",
    "score_run": "evalcore.scoring",
    "scorer_from_spec": "evalcore.scorer_registry",
    "target": "evalcore.discovery",
}


__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)


if TYPE_CHECKING:  # the names for type checkers and IDEs
    from evalcore.discovery import TargetSpec, discover_targets, target
    from evalcore.inference import run_case
    from evalcore.jsonvalue import MISSING
    from evalcore.loaders import CaseBankError, LoadedCaseBank, load_cases
    from evalcore.report import EvalReport, MetricSummary, ReportBuilder
    from evalcore.runner import rescore, run_eval
    from evalcore.scorer_registry import scorer_from_spec
    from evalcore.scorers import ScoreContext, Scorer, ScorerSpec
    from evalcore.scoring import score_run
    from evalcore.splits import HeldOutError, assign_split, guard_split
    from evalcore.store import EvalRunInfo, EvalSink, EvalStore, InMemoryEvalStore, MultiSink
    from evalcore.targets import Node, Pipeline, RunContext, as_agent, resolve_target
    from evalcore.tracing import TraceEvent, Tracer
    from evalcore.types import SPLITS, Case, CaseResult, CaseStatus, ErrorInfo, RunRecord, Score, TargetOutput

__all__ = [
    "MISSING",
    "SPLITS",
    "Case",
    "CaseBankError",
    "CaseResult",
    "CaseStatus",
    "ErrorInfo",
    "EvalReport",
    "EvalRunInfo",
    "EvalSink",
    "EvalStore",
    "HeldOutError",
    "InMemoryEvalStore",
    "LoadedCaseBank",
    "MetricSummary",
    "MultiSink",
    "Node",
    "Pipeline",
    "ReportBuilder",
    "RunContext",
    "RunRecord",
    "Score",
    "ScoreContext",
    "Scorer",
    "ScorerSpec",
    "TargetOutput",
    "TargetSpec",
    "TraceEvent",
    "Tracer",
    "as_agent",
    "assign_split",
    "discover_targets",
    "guard_split",
    "load_cases",
    "rescore",
    "resolve_target",
    "run_case",
    "run_eval",
    "score_run",
    "scorer_from_spec",
    "target",
]
