"""The evals tables, one module per topic (:mod:`.sets`, :mod:`.runs`, :mod:`.reviews`,
:mod:`.workers`, :mod:`.shards`, :mod:`.ledger`), re-exported here: ``from apps.evals.models import EvalRun``
is how every other module names them."""

from __future__ import annotations

from apps.evals.models.digests import RunDigest
from apps.evals.models.ledger import (
    InvocationKind,
    InvocationStatus,
    JudgeSpecVersion,
    ScorerInvocation,
)
from apps.evals.models.prices import (
    CaseCost,
    ModelPrice,
)
from apps.evals.models.reviews import (
    Review,
    ReviewAssignment,
    ReviewRevision,
    ReviewVerdict,
)
from apps.evals.models.runs import (
    MISSING_HASH,
    EvalResult,
    EvalRun,
    EvalRunStatus,
    ResultStatus,
    SearchIndexState,
    new_eval_run_id,
)
from apps.evals.models.sets import (
    CaseSnapshot,
    EvalCase,
    EvalSet,
    SetVersion,
    SetVersionCase,
    Split,
)
from apps.evals.models.shards import (
    EvalShard,
    ShardStatus,
)
from apps.evals.models.sources import (
    RunSource,
)
from apps.evals.models.workers import (
    TaskWorker,
)

__all__ = [
    "MISSING_HASH",
    "CaseCost",
    "CaseSnapshot",
    "EvalCase",
    "EvalResult",
    "EvalRun",
    "EvalRunStatus",
    "EvalSet",
    "EvalShard",
    "InvocationKind",
    "InvocationStatus",
    "JudgeSpecVersion",
    "ModelPrice",
    "ResultStatus",
    "Review",
    "ReviewAssignment",
    "ReviewRevision",
    "ReviewVerdict",
    "RunDigest",
    "RunSource",
    "ScorerInvocation",
    "SearchIndexState",
    "SetVersion",
    "SetVersionCase",
    "ShardStatus",
    "Split",
    "TaskWorker",
    "new_eval_run_id",
]
