"""Evalsite's eval engine: framework-free (no Django import, ever).

Usable from a notebook or plain pytest::

    from evalcore import Case, run_eval
    report = asyncio.run(run_eval([Case("q1", "2+2", "4")], lambda q: "4", ["exact_match"]))
"""

from evalcore.discovery import TargetSpec, discover_targets, target
from evalcore.inference import run_case
from evalcore.jsonvalue import MISSING
from evalcore.loaders import CaseBankError, LoadedCaseBank, load_cases
from evalcore.report import EvalReport, MetricSummary, ReportBuilder
from evalcore.runner import rescore, run_eval
from evalcore.scorers import ScoreContext, Scorer, ScorerSpec, scorer_from_spec
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
