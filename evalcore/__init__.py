"""Evalsite's eval engine: framework-free (no Django import, ever).

Usable from a notebook or plain pytest::

    from evalcore import Case, run_eval
    report = asyncio.run(run_eval([Case("q1", "2+2", "4")], lambda q: "4", ["exact_match"]))
"""

from evalcore.report import EvalReport, MetricSummary, ReportBuilder
from evalcore.runner import rescore, run_case, run_eval, score_run
from evalcore.scorers import Scorer, ScoreContext, ScorerSpec, scorer_from_spec
from evalcore.store import EvalRunInfo, EvalSink, EvalStore, InMemoryEvalStore, MultiSink
from evalcore.targets import Node, Pipeline, RunContext, as_agent, resolve_target
from evalcore.tracing import Tracer, TraceEvent
from evalcore.types import MISSING, SPLITS, Case, CaseResult, CaseStatus, ErrorInfo, RunRecord, Score, TargetOutput

__all__ = [
    "MISSING",
    "SPLITS",
    "Case",
    "CaseResult",
    "CaseStatus",
    "ErrorInfo",
    "EvalReport",
    "EvalRunInfo",
    "EvalSink",
    "EvalStore",
    "InMemoryEvalStore",
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
    "TraceEvent",
    "Tracer",
    "as_agent",
    "rescore",
    "resolve_target",
    "run_case",
    "run_eval",
    "score_run",
    "scorer_from_spec",
]
