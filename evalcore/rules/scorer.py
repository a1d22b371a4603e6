"""The ``rule_adherence`` scorer: for every rule an agent was given, did it reach the model, and
was it honoured?

Per rule and per case, an *outcome*:

* ``rule_absent``: the rule is missing from a model request of the run (with ``require="every"``,
  the default: from at least one request, e.g. dropped after turn 1; with ``require="any"``: from
  all of them). Plumbing to fix, not prompting. Decided from the trace alone (see
  :mod:`evalcore.rules.presence`); the judge is not asked.
* ``honoured`` / ``rule_ignored`` / ``not_applicable``: the judge's verdict on a present rule
  (see :mod:`evalcore.rules.judging`).
* ``unjudged``: present, but no judge model is configured. Never counted as honoured or ignored.
* ``judge_error``: present, but the judge gave no readable answer. Never a verdict.

The case verdict (score ``rule_adherence``, a ``bool``): ``False`` when any rule is absent or
ignored (the outcome is known whatever the other rules say); otherwise a *judge error* on the
score (``Score.failure``: the case is ``errored``, never a verdict) when a rule's judgement failed;
otherwise no verdict (``value``/``passed`` ``None``: the case is ``unscored`` unless another scorer
judges it) when a rule is unjudged or no rule applied; otherwise ``True``.

A second score, ``rule_adherence.presence``, measures the share of the case's rules present
(0..1, no verdict): it is known even when the judge is not.

Details (``metadata`` of the ``rule_adherence`` score, also on its failure form), for pages and
the API (:mod:`evalcore.rules.aggregate` reads them)::

    {"rules": [{"id", "text", "source", "outcome", "turns", "n_turns", "presence",
                "dropped_after", "match", "similarity", "reason", "judge_error"?}],
     "n_requests": int, "require": "every" | "any", "fuzzy_threshold": float | None,
     "judge_model": str | None, "prompt_version": str, "counts": {outcome: n},
     "judge_calls": int, "judge_tokens_in": int, "judge_tokens_out": int}
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from evalcore.rules.judging import PROMPT_VERSION, RuleJudge, render
from evalcore.rules.model import Rule, RuleError, case_rules, merge_rules, parse_rules
from evalcore.rules.presence import DEFAULT_FUZZY_THRESHOLD, model_requests, rule_presence
from evalcore.runtime.models import ChatModel
from evalcore.scorers.base import ScoreContext, Scorer, ScorerSpec
from evalcore.scorers.conversation import CONVERSATION_SCOPE
from evalcore.serial import to_record
from evalcore.types import Score

SCORE_NAME = "rule_adherence"
PRESENCE_SCORE = "rule_adherence.presence"

HONOURED = "honoured"
IGNORED = "rule_ignored"
ABSENT = "rule_absent"
NOT_APPLICABLE = "not_applicable"
UNJUDGED = "unjudged"
JUDGE_ERROR = "judge_error"
OUTCOMES: tuple[str, ...] = (HONOURED, IGNORED, ABSENT, NOT_APPLICABLE, UNJUDGED, JUDGE_ERROR)
"""Every per-rule outcome; the first four are decided, the last two are not."""
DECIDED: frozenset[str] = frozenset({HONOURED, IGNORED, ABSENT, NOT_APPLICABLE})

_FROM_JUDGE = {"honoured": HONOURED, "ignored": IGNORED, "not_applicable": NOT_APPLICABLE}


def tool_calls_of(ctx: ScoreContext) -> list[dict[str, Any]]:
    """The run's tool calls ``[{name, arguments}]``: from the trace's ``execute_tool`` spans, else
    from ``run.metadata["tool_calls"]``."""
    calls: list[dict[str, Any]] = []
    for event in sorted(ctx.events, key=lambda e: (e.get("seq") if isinstance(e, dict) else e.seq) or 0):
        kind = event.get("type") if isinstance(event, dict) else event.type
        payload = (event.get("payload") if isinstance(event, dict) else event.payload) or {}
        if kind == "span_begin" and payload.get("kind") == "execute_tool":
            name = event.get("name") if isinstance(event, dict) else event.name
            calls.append({"name": name, "arguments": payload.get("arguments")})
    if calls:
        return calls
    stored = ctx.run.metadata.get("tool_calls")
    return [c for c in stored if isinstance(c, dict)] if isinstance(stored, list) else []


@dataclass
class RuleAdherence(Scorer):
    """Presence (from the trace) and adherence (from an injected judge) of each rule; see the module doc.

    Attributes:
        rules: The target's rules (``{"id", "text"}`` dicts or :class:`Rule`); ``None`` until bound
            to a target by :func:`bind_target_rules`. A case's ``metadata.rules`` are added (same
            id: the case's text wins).
        require: ``"every"`` (a rule must be in every model request) or ``"any"``.
        fuzzy_threshold: Minimum ``token_set_ratio`` (0..100) of a fuzzy match; ``None``: exact and
            template matches only.
        judge: Ask the judge about present rules when a model is available (``model``, else the
            run's :class:`~evalcore.scorers.base.ScorerServices` ``judge``, picked by
            ``judge_model`` when it is a mapping); ``False``: presence only (present rules stay
            ``unjudged``).
        judge_model: The judge model's name, recorded in the spec (defaults to ``model.name``).
        temperature, seed, max_tokens, timeout_s, retries, use_schema: Judge call settings (see
            :class:`~evalcore.rules.judging.RuleJudge`).
        model: The judge model object (not serialised).

    Raises:
        ValueError: At construction, a bad ``require``, threshold, ``retries`` or rules.
    """

    name: ClassVar[str] = SCORE_NAME
    version: ClassVar[str] = "1"
    # a conversation's rules are judged once over every turn (evalcore.scorers.conversation)
    scope: ClassVar[str] = CONVERSATION_SCOPE
    rules: list[Any] | None = None
    require: str = "every"
    fuzzy_threshold: float | None = DEFAULT_FUZZY_THRESHOLD
    judge: bool = True
    judge_model: str | None = None
    temperature: float = 0.0
    seed: int | None = 0
    max_tokens: int | None = 512
    timeout_s: float | None = 120.0
    retries: int = 2
    use_schema: bool = True
    model: ChatModel | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.require not in ("every", "any"):
            raise ValueError(f"require must be 'every' or 'any', got {self.require!r}")
        if self.fuzzy_threshold is not None and (
            isinstance(self.fuzzy_threshold, bool) or not 0.0 <= float(self.fuzzy_threshold) <= 100.0
        ):
            raise ValueError(f"fuzzy_threshold must be in 0..100 or None, got {self.fuzzy_threshold!r}")
        if self.retries < 0:
            raise ValueError(f"retries must be >= 0, got {self.retries}")
        if self.timeout_s is not None and not (math.isfinite(self.timeout_s) and self.timeout_s > 0):
            raise ValueError(f"timeout_s must be None or a finite number > 0, got {self.timeout_s!r}")
        self._rules: list[Rule] = [] if self.rules is None else self._parse(self.rules)
        self._format_level: dict[str, int] = {}

    @staticmethod
    def _parse(values: Any) -> list[Rule]:
        try:
            return parse_rules(values, where="rule_adherence: rules")
        except RuleError as exc:
            raise ValueError(str(exc)) from None

    def bind(self, rules: list[Rule]) -> None:
        """Give the scorer its target's rules (only when it was built with none)."""
        if self.rules is None:
            self._rules = list(rules)
            self.rules = [to_record(r) for r in rules]

    @property
    def score_names(self) -> list[str]:
        return [SCORE_NAME, PRESENCE_SCORE]

    def spec(self) -> ScorerSpec:
        """Options as args, the rules as ``{id, text, source}`` dicts, the judge model by name."""
        args: dict[str, Any] = {}
        for f in fields(self):
            if f.name != "model":
                args[f.name] = getattr(self, f.name)
        args["rules"] = None if self.rules is None else [to_record(r) for r in self._rules]
        if args["judge_model"] is None and self.model is not None:
            args["judge_model"] = self.model.name
        return ScorerSpec(self.name, args, self.version)

    def _judge_model(self, judge: ChatModel | Mapping[str, ChatModel] | None) -> ChatModel | None:
        if not self.judge:
            return None
        if self.model is not None:
            return self.model
        if isinstance(judge, Mapping):
            judge = judge.get(self.judge_model) if self.judge_model else None
        return judge if isinstance(judge, ChatModel) else None

    async def score(self, ctx: ScoreContext) -> list[Score]:
        """Score one case (see the module doc). Never raises for anything the judge does."""
        try:
            rules = merge_rules(self._rules, case_rules(ctx.case.metadata, case_id=ctx.case.id))
        except RuleError as exc:
            return [Score.failure(SCORE_NAME, str(exc), kind="bad_rules"), Score.failure(PRESENCE_SCORE, str(exc))]
        model = self._judge_model(ctx.judge)
        base: dict[str, Any] = {
            "require": self.require,
            "fuzzy_threshold": self.fuzzy_threshold,
            "judge_model": model.name if model is not None else None,
            "prompt_version": PROMPT_VERSION,
        }
        if not rules:
            meta = {**base, "rules": [], "n_requests": 0, "counts": {}}
            return [Score(SCORE_NAME, None, explanation="no rules declared for this case", metadata=meta)]
        requests = model_requests(ctx.events)
        if not requests:
            why = "no model request in the trace: rule presence cannot be read (is the target an agent?)"
            return [
                Score.failure(SCORE_NAME, why, kind="no_model_requests", **base),
                Score.failure(PRESENCE_SCORE, why, kind="no_model_requests"),
            ]
        judge = None
        if model is not None:
            judge = RuleJudge(
                model,
                temperature=self.temperature,
                seed=self.seed,
                max_tokens=self.max_tokens,
                timeout_s=self.timeout_s,
                retries=self.retries,
                use_schema=self.use_schema,
                tracer=ctx.tracer,
                format_level=self._format_level,
                cache=ctx.judge_cache,
            )
        calls = tool_calls_of(ctx)
        details: list[dict[str, Any]] = []
        usage = Counter[str]()
        n_present = 0
        for rule in rules:
            found = rule_presence(rule, requests, self.fuzzy_threshold)
            row: dict[str, Any] = {**to_record(rule), **to_record(found), "reason": None}
            if not found.present(self.require):
                row["outcome"] = ABSENT
                row["reason"] = _absent_reason(found.presence, found.dropped_after, found.n_turns, found.turns)
            else:
                n_present += 1
                if judge is None:
                    row["outcome"] = UNJUDGED
                else:
                    messages = render(rule, input=ctx.case.input, output=ctx.output, tool_calls=calls)
                    verdict = await judge.judge(rule, messages)
                    usage.update(
                        calls=verdict.attempts,
                        cache_hits=int(verdict.cached),
                        tokens_in=verdict.tokens_in,
                        tokens_out=verdict.tokens_out,
                    )
                    if verdict.verdict is None:
                        row["outcome"] = JUDGE_ERROR
                        row["judge_error"] = {
                            "kind": verdict.error_kind,
                            "detail": verdict.error,
                            "raw": verdict.raw,
                            "attempts": verdict.attempts,
                        }
                    else:
                        row["outcome"] = _FROM_JUDGE[verdict.verdict]
                        row["reason"] = verdict.reason
            details.append(row)
        counts = Counter(row["outcome"] for row in details)
        meta = {
            **base,
            "rules": details,
            "n_requests": len(requests),
            "counts": dict(counts),
            "judge_calls": usage["calls"],
            "judge_cache_hits": usage["cache_hits"],
            "judge_tokens_in": usage["tokens_in"],
            "judge_tokens_out": usage["tokens_out"],
        }
        presence = Score(
            PRESENCE_SCORE,
            n_present / len(rules),
            explanation=f"{n_present} of {len(rules)} rule(s) present",
            metadata={"present": n_present, "rules": len(rules)},
        )
        return [_verdict(details, counts, meta), presence]


def _absent_reason(presence: str, dropped_after: int | None, n_turns: int, turns: list[int]) -> str:
    if presence == "dropped":
        first = "turn 1" if dropped_after == 1 else f"turns 1..{dropped_after}"
        return f"present in {first} of {n_turns}, then dropped"
    if presence == "partial":
        return f"present in turn(s) {', '.join(map(str, turns))} of {n_turns} only"
    return f"in none of the {n_turns} model request(s)"


def _verdict(details: list[dict[str, Any]], counts: Counter[str], meta: dict[str, Any]) -> Score:
    failing = [row["id"] for row in details if row["outcome"] in (ABSENT, IGNORED)]
    if failing:
        words = ", ".join(f"{row['id']} {row['outcome']}" for row in details if row["id"] in failing)
        return Score(SCORE_NAME, False, explanation=words, metadata=meta)  # a bool value is its own verdict
    if counts[JUDGE_ERROR]:
        errored = ", ".join(row["id"] for row in details if row["outcome"] == JUDGE_ERROR)
        return Score.failure(
            SCORE_NAME, f"judge gave no readable verdict for rule(s) {errored}", kind=JUDGE_ERROR, **meta
        )
    if counts[UNJUDGED]:
        text = f"{counts[UNJUDGED]} rule(s) present, not judged (no judge model): no verdict"
        return Score(SCORE_NAME, None, explanation=text, metadata=meta)
    if not counts[HONOURED]:
        return Score(SCORE_NAME, None, explanation="no rule bore on this case", metadata=meta)
    return Score(SCORE_NAME, True, explanation=f"{counts[HONOURED]} rule(s) honoured", metadata=meta)


def bind_target_rules(scorers: list[Scorer], rules: list[Rule]) -> list[Scorer]:
    """Give every :class:`RuleAdherence` among ``scorers`` that was built without rules the target's
    rules (in place; returns ``scorers``), so its stored spec records them."""
    for scorer in scorers:
        if isinstance(scorer, RuleAdherence):
            scorer.bind(rules)
    return scorers
