"""Reads of the judge reliability ledger (``ScorerInvocation``): a run's invocations per scorer by
status and reason (the coverage of every judge figure), its judge cost (from the price table's
per-case costs, :mod:`apps.evals.queries.costs`: never priced twice), and the rows for the API."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from django.db.models import Count, QuerySet, Sum

from apps.evals.models import EvalRun, InvocationStatus, ScorerInvocation
from apps.evals.queries.costs import Estimate, cost_latency
from evalcore.judge.agreement import agreement
from evalcore.judge.outcome import JUDGE_SCORE

STATUS_ORDER = tuple(InvocationStatus.values)


def reason_phrase(reason: str) -> str:
    """A stored reason's fixed phrase (what the ledger groups by): the part before ``": "``."""
    return reason.split(": ", 1)[0]


@dataclass(slots=True)
class ReasonCount:
    """How many invocations ended with one status for one reason."""

    status: str
    reason: str
    n: int


@dataclass(slots=True)
class ScorerLedger:
    """One scorer's invocations in a run.

    Attributes:
        scorer: The scorer's name.
        kind: ``judge`` or ``scorer``.
        judge_models: The judge models named (judges only).
        total: Invocations recorded.
        by_status: Invocations per status, in :data:`STATUS_ORDER` (zeros left out).
        reasons: Errored and skipped invocations by (status, reason phrase), most frequent first.
        calls: Model calls made (samples and retries included; ``None`` for a plain scorer).
        tokens_in: Judge prompt tokens.
        tokens_out: Judge completion tokens.
    """

    scorer: str
    kind: str
    judge_models: list[str]
    total: int
    by_status: dict[str, int]
    reasons: list[ReasonCount] = field(default_factory=list)
    calls: int | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None

    @property
    def done(self) -> int:
        """Invocations that gave a verdict or a measure."""
        return self.by_status.get(InvocationStatus.DONE, 0)


@dataclass(slots=True)
class RunLedger:
    """A run's ledger: per scorer, and the judge's cost.

    Attributes:
        eval_run_id: The run.
        n_results: The run's stored results (N of each scorer's coverage ``done / N``).
        scorers: Judges first, then plain scorers, by name.
        judge_cost: Mean judge USD per judged case with its 95% interval (``None``: no judge spend
            priced, or no cost rows yet).
        n_judge: Cases the judge spent on (per-case cost rows).
        n_judge_priced: Of them, those priced (``judge_cost``'s coverage).
    """

    eval_run_id: str
    n_results: int
    scorers: list[ScorerLedger]
    judge_cost: Estimate | None = None
    n_judge: int = 0
    n_judge_priced: int = 0


def run_ledger(eval_run: EvalRun) -> RunLedger:
    """The ledger of ``eval_run`` (two grouped queries on the ledger, and the cost figures)."""
    rows = (
        ScorerInvocation.objects.filter(eval_run=eval_run)
        .values("scorer", "kind", "status", "reason", "judge_model")
        .annotate(n=Count("id"), calls=Sum("calls"), tokens_in=Sum("tokens_in"), tokens_out=Sum("tokens_out"))
        .order_by()
    )
    found: dict[str, ScorerLedger] = {}
    reasons: dict[str, dict[tuple[str, str], int]] = defaultdict(lambda: defaultdict(int))
    for row in rows:
        entry = found.get(row["scorer"])
        if entry is None:
            entry = found[row["scorer"]] = ScorerLedger(row["scorer"], row["kind"], [], 0, {})
        entry.total += row["n"]
        entry.by_status[row["status"]] = entry.by_status.get(row["status"], 0) + row["n"]
        if row["judge_model"] and row["judge_model"] not in entry.judge_models:
            entry.judge_models.append(row["judge_model"])
        for name in ("calls", "tokens_in", "tokens_out"):
            if row[name] is not None:
                setattr(entry, name, (getattr(entry, name) or 0) + row[name])
        if row["reason"]:
            reasons[row["scorer"]][(row["status"], reason_phrase(row["reason"]))] += row["n"]
    for name, entry in found.items():
        entry.by_status = {s: entry.by_status[s] for s in STATUS_ORDER if entry.by_status.get(s)}
        entry.reasons = sorted(
            (ReasonCount(status, reason, n) for (status, reason), n in reasons[name].items()),
            key=lambda r: (-r.n, r.status, r.reason),
        )
        entry.judge_models.sort()
    ordered = sorted(found.values(), key=lambda e: (e.kind != "judge", e.scorer))
    ledger = RunLedger(eval_run.pk, eval_run.results.count(), ordered)
    costs = cost_latency([eval_run.pk]).get(eval_run.pk)
    if costs is not None:
        ledger.judge_cost = costs.cost_judge_usd
        ledger.n_judge, ledger.n_judge_priced = costs.n_judge, costs.n_judge_priced
    return ledger


def run_invocations(
    eval_run: EvalRun, *, status: str | None = None, scorer: str | None = None
) -> QuerySet[ScorerInvocation]:
    """A run's invocations in case order, optionally of one status and one scorer (the API's list)."""
    rows = ScorerInvocation.objects.filter(eval_run=eval_run)
    if status:
        rows = rows.filter(status=status)
    if scorer:
        rows = rows.filter(scorer=scorer)
    return rows.order_by("case_id", "repeat_index", "scorer", "id")


MAX_JUDGE_DISAGREEMENTS = 50
"""Cases listed where two runs' judges disagree."""


@dataclass(slots=True)
class JudgeSide:
    """One run's judge on the compare page.

    Attributes:
        eval_run_id: The run.
        spec: Its rubric judge spec's arguments (``{}``: not judged).
        verdicts: Results with a judge verdict (k of the coverage ``verdicts / results``).
        results: The run's results.
        ledger: The run's ledger (the judge's row and the judge cost are read from it).
    """

    eval_run_id: str
    spec: dict[str, object]
    verdicts: int
    results: int
    ledger: RunLedger

    @property
    def judge(self) -> ScorerLedger | None:
        """The rubric judge's ledger row, if the run was judged."""
        return next((s for s in self.ledger.scorers if s.scorer == JUDGE_SCORE), None)


@dataclass(slots=True)
class JudgesSideBySide:
    """Two runs' judge verdicts on the same cases (e.g. a run and its re-judging by an aligned judge).

    Attributes:
        a, b: The two sides.
        same_spec: Both were judged with the same spec.
        paired: Cases (case, repeat) both judged; the counts below are over them.
        both_pass, both_fail, a_only, b_only: Pass/fail agreement counts (``a_only``: A passed, B failed).
        kappa: Cohen's kappa between the two judges over ``paired`` (``None`` when none).
        disagreements: Up to :data:`MAX_JUDGE_DISAGREEMENTS` cases ``(case id, repeat, A passed, B passed)``.
    """

    a: JudgeSide
    b: JudgeSide
    same_spec: bool
    paired: int
    both_pass: int
    both_fail: int
    a_only: int
    b_only: int
    kappa: float | None
    disagreements: list[tuple[str, int, bool, bool]]

    @property
    def sides(self) -> list[JudgeSide]:
        """``[a, b]`` (for the template's loops)."""
        return [self.a, self.b]


def _judge_verdicts(eval_run: EvalRun) -> dict[tuple[str, int], bool]:
    found: dict[tuple[str, int], bool] = {}
    rows = eval_run.results.values_list("case_id", "repeat_index", "scores")
    for case_id, repeat, scores in rows.iterator(chunk_size=2000):
        for score in scores or []:
            if score.get("name") == JUDGE_SCORE and isinstance(score.get("passed"), bool) and not score.get("error"):
                found[(case_id, repeat)] = score["passed"]
    return found


def _side(eval_run: EvalRun, verdicts: dict[tuple[str, int], bool]) -> JudgeSide:
    spec = next(
        (
            dict(s.get("args") or {})
            for s in eval_run.scorer_specs or []
            if isinstance(s, dict) and s.get("name") == JUDGE_SCORE
        ),
        {},
    )
    ledger = run_ledger(eval_run)
    return JudgeSide(eval_run.pk, spec, len(verdicts), ledger.n_results, ledger)


def judges_side_by_side(run_a: EvalRun, run_b: EvalRun) -> JudgesSideBySide:
    """Both runs' judge verdicts case by case, their agreement (Cohen's kappa, Cohen 1960), the
    disagreeing cases, and each judge's ledger and cost (two streamed reads of the results)."""
    va, vb = _judge_verdicts(run_a), _judge_verdicts(run_b)
    pairs = [(va[key], vb[key], key) for key in sorted(va.keys() & vb.keys())]
    side_a, side_b = _side(run_a, va), _side(run_b, vb)
    return JudgesSideBySide(
        a=side_a,
        b=side_b,
        same_spec=side_a.spec == side_b.spec,
        paired=len(pairs),
        both_pass=sum(1 for x, y, _ in pairs if x and y),
        both_fail=sum(1 for x, y, _ in pairs if not x and not y),
        a_only=sum(1 for x, y, _ in pairs if x and not y),
        b_only=sum(1 for x, y, _ in pairs if y and not x),
        kappa=agreement([(x, y) for x, y, _ in pairs]).cohen_kappa if pairs else None,
        disagreements=[(k[0], k[1], x, y) for x, y, k in pairs if x != y][:MAX_JUDGE_DISAGREEMENTS],
    )
