"""ADK's ``test_config.json`` read beside an ADK eval file: its criteria become the cases' verdicts.

ADK reads the evaluation criteria of ``x.test.json`` from the ``test_config.json`` in the same
folder. So does :func:`evalcore.loaders.adk.load_adk_file` (for a file on disk): each criterion
becomes a scorer spec in every case's ``metadata.scorers``, scored by the case's own scorers
(``case.<metric>`` scores, :class:`evalcore.scorer_registry.CaseScorers`), with the criterion's
threshold as the verdict's bound. The file's criteria are kept as read in
``metadata.adk_criteria``.

Forms read (ADK's ``EvalConfig``; keys in snake_case or camelCase):

* ``{"criteria": {"tool_trajectory_avg_score": 1.0, "response_match_score": 0.8}}``: a bare
  number is the threshold;
* ``{"criteria": {"tool_trajectory_avg_score": {"threshold": 1.0, "match_type": "IN_ORDER",
  "ignore_args": false}}}``: a criterion object (ADK >= 1.16);
* the rubric-based and LLM-judged criteria ``{"threshold", "judge_model_options":
  {"judge_model", "num_samples"}, "rubrics": [{"rubric_id", "rubric_content":
  {"text_property"}}]}``.

Mapping (:data:`MAPPED`): ``tool_trajectory_avg_score`` and ``response_match_score`` →
:mod:`evalcore.scorers.adk_metrics` (same figures as ADK, threshold applied as ADK does);
``rubric_based_final_response_quality_v1`` and ``final_response_match_v2`` → the rubric judge
on each turn's final response (``rubric_judge``, the rubrics' texts as its notes);
``rubric_based_tool_use_quality_v1`` and ``multi_turn_trajectory_quality_v1`` /
``multi_turn_tool_use_quality_v1`` → the judge over the whole transcript
(``conversation_rubric``, which sees the tool calls); ``multi_turn_task_success_v1`` →
``goal_completion``. A judge's ``num_samples`` becomes its ``samples``. The judged criteria keep
*our* judge's verdict rule (per-axis minimums) rather than ADK's threshold over its own rubric
score, which has no equivalent; the threshold is kept in ``metadata.adk_criteria``. A criterion
with no Evalsite equivalent (``hallucinations_v1``, ``safety_v1``, a custom metric) is named in
``metadata.unscored_assertions``: shown as unchecked, never a pass.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from evalcore.loaders.errors import CaseBankError
from evalcore.types import JSON, Case

CONFIG_NAME = "test_config.json"

MAPPED: dict[str, str] = {
    "tool_trajectory_avg_score": "tool_trajectory_avg_score",
    "response_match_score": "response_match_score",
    "rubric_based_final_response_quality_v1": "rubric_judge",
    "final_response_match_v2": "rubric_judge",
    "rubric_based_tool_use_quality_v1": "conversation_rubric",
    "multi_turn_trajectory_quality_v1": "conversation_rubric",
    "multi_turn_tool_use_quality_v1": "conversation_rubric",
    "multi_turn_task_success_v1": "goal_completion",
}
"""ADK metric name → the Evalsite scorer that scores it."""

TOOL_USE_NOTE = "Grade the assistant's tool calls across the conversation: the right tools, with the right arguments."


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _get(obj: dict[str, Any], key: str) -> Any:
    return obj[key] if key in obj else obj.get(_camel(key))


def _threshold(value: Any, path: str, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise CaseBankError(f"a threshold must be a finite number, got {value!r}", path=path, field=where)
    if not 0.0 <= value <= 1.0:  # every ADK criterion scores 0..1: a bound above 1 can never pass
        raise CaseBankError(
            f"a threshold must be from 0 to 1 (ADK's scores are 0..1), got {value!r}", path=path, field=where
        )
    return float(value)


def _rubric_texts(rubrics: Any, path: str, where: str) -> list[str]:
    if rubrics is None:
        return []
    if not isinstance(rubrics, list):
        raise CaseBankError("'rubrics' must be a list of rubrics", path=path, field=where)
    texts = []
    for index, rubric in enumerate(rubrics):
        at = f"{where}[{index}]"
        content = _get(rubric, "rubric_content") if isinstance(rubric, dict) else None
        text = _get(content, "text_property") if isinstance(content, dict) else None
        if not isinstance(text, str) or not text.strip():
            raise CaseBankError(
                'a rubric needs its text: {"rubric_id", "rubric_content": {"text_property": text}}', path=path, field=at
            )
        texts.append(text.strip())
    return texts


def criterion_spec(metric: str, criterion: Any, *, path: str) -> dict[str, JSON] | None:
    """The scorer spec ``{"name", "args"}`` of one ADK criterion, ``None`` when it has no equivalent.

    Raises:
        CaseBankError: A threshold that is no finite number in 0..1, an unknown match type or a rubric
            without text, naming ``criteria.<metric>...``.
    """
    where = f"criteria.{metric}"
    scorer = MAPPED.get(metric)
    if scorer is None:
        return None
    if not isinstance(criterion, dict):
        criterion = {"threshold": _threshold(criterion, path, where)}
    elif "threshold" not in criterion:
        raise CaseBankError("a criterion object needs a 'threshold'", path=path, field=where)
    threshold = _threshold(criterion["threshold"], path, f"{where}.threshold")
    args: dict[str, JSON] = {}
    if scorer == "tool_trajectory_avg_score":
        from evalcore.scorers.adk_metrics import normalize_match_type

        args["threshold"] = threshold
        match_type = _get(criterion, "match_type")
        if match_type is not None:
            try:
                args["match_type"] = normalize_match_type(match_type)
            except ValueError as exc:
                raise CaseBankError(str(exc), path=path, field=f"{where}.match_type") from None
        ignore = _get(criterion, "ignore_args")
        if ignore is not None:
            if not isinstance(ignore, bool):
                raise CaseBankError("'ignore_args' must be true or false", path=path, field=f"{where}.ignore_args")
            args["ignore_args"] = ignore
    elif scorer == "response_match_score":
        args["threshold"] = threshold
    else:
        texts = _rubric_texts(_get(criterion, "rubrics"), path, f"{where}.rubrics")
        if metric in ("rubric_based_tool_use_quality_v1", "multi_turn_tool_use_quality_v1"):
            texts.insert(0, TOOL_USE_NOTE)
        if texts:
            args["rubric"] = "\n".join(f"- {text}" for text in texts)
        options = _get(criterion, "judge_model_options")
        samples = _get(options, "num_samples") if isinstance(options, dict) else None
        if samples is not None:
            if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
                raise CaseBankError(
                    "'num_samples' must be an integer >= 1", path=path, field=f"{where}.judge_model_options.num_samples"
                )
            args["samples"] = samples
    return {"name": scorer, "args": args}


def read_test_config(config: Path) -> tuple[dict[str, JSON], list[dict[str, JSON]], list[str]]:
    """Read ``config`` (an ADK ``test_config.json``): ``(criteria as read, scorer specs, unmapped metric names)``.

    Raises:
        CaseBankError: Unreadable or invalid JSON, no ``criteria`` object, or a bad criterion
            (see :func:`criterion_spec`), naming the file and the field.
    """
    path = str(config)
    try:
        data = json.loads(config.read_text(encoding="utf-8-sig"))
    except OSError as exc:
        raise CaseBankError(f"cannot read the ADK criteria file: {exc.strerror or exc}", path=path) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CaseBankError(f"not valid JSON: {exc}", path=path) from None
    criteria = _get(data, "criteria") if isinstance(data, dict) else None
    if not isinstance(criteria, dict):
        raise CaseBankError('an ADK test_config.json is {"criteria": {metric: threshold or criterion}}', path=path)
    specs: list[dict[str, JSON]] = []
    unmapped: list[str] = []
    for metric, criterion in criteria.items():
        spec = criterion_spec(str(metric), criterion, path=path)
        if spec is None:
            unmapped.append(str(metric))
        else:
            specs.append(spec)
    return criteria, specs, unmapped


def attach_criteria(cases: list[Case], config: Path) -> list[Case]:
    """``cases`` with the criteria of ``config`` in their metadata (see the module docstring).

    A case's own ``metadata.scorers`` are kept, the criteria's specs added after them.

    Raises:
        CaseBankError: The criteria file is invalid (:func:`read_test_config`).
    """
    criteria, specs, unmapped = read_test_config(config)
    for case in cases:
        own = case.metadata.get("scorers")
        case.metadata["scorers"] = [*(own if isinstance(own, list) else []), *specs]
        case.metadata["adk_criteria"] = criteria
        if unmapped:
            case.metadata["unscored_assertions"] = list(unmapped)
    return cases


def beside(eval_file: Path | None) -> Path | None:
    """The ``test_config.json`` in the folder of ``eval_file``, ``None`` when there is none."""
    if eval_file is None:
        return None
    config = eval_file.parent / CONFIG_NAME
    return config if config.is_file() and config.resolve() != eval_file.resolve() else None
