"""The judge model online rules use: configured by the environment, as ``evalsite eval --judge``.

``EVALSITE_JUDGE_MODEL`` (else ``EVALSITE_MODEL``) names it; ``EVALSITE_JUDGE_BASE_URL`` (else
``EVALSITE_MODEL_BASE_URL``) is its OpenAI-compatible endpoint; ``EVALSITE_JUDGE_API_KEY_ENV``
names the variable holding its key. None set: rules whose scorers need a judge keep their
sampled traces pending with the reason "no judge configured".
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from evalcore.runtime.models import ModelError
from evalcore.runtime.openai_client import model_from_settings
from evalcore.scorers.base import Scorer, ScorerServices
from evalcore.scoring import takes_rubric


def needs_judge(scorers: Sequence[Scorer]) -> bool:
    """Whether any of ``scorers`` calls a judge model (a rubric judge)."""
    return any(takes_rubric(s) for s in scorers)


def judge_services(env: Mapping[str, str] = os.environ) -> tuple[ScorerServices, str]:
    """The scorer services with the configured judge, and ``""``; or empty services and why not.

    Returns:
        ``(services, problem)``: ``problem`` is ``""`` when a judge is configured, else a sentence.
    """
    name = env.get("EVALSITE_JUDGE_MODEL") or env.get("EVALSITE_MODEL") or ""
    if not name:
        return ScorerServices(), "no judge configured: set EVALSITE_JUDGE_MODEL (and EVALSITE_JUDGE_BASE_URL)"
    settings_env = dict(env)
    settings_env["EVALSITE_MODEL"] = name
    base_url = env.get("EVALSITE_JUDGE_BASE_URL") or env.get("EVALSITE_MODEL_BASE_URL") or ""
    if base_url:
        settings_env["EVALSITE_MODEL_BASE_URL"] = base_url
    if env.get("EVALSITE_JUDGE_API_KEY_ENV"):
        settings_env["EVALSITE_MODEL_API_KEY_ENV"] = env["EVALSITE_JUDGE_API_KEY_ENV"]
    try:
        return ScorerServices(judge=model_from_settings(settings_env)), ""
    except ModelError as exc:
        return ScorerServices(), f"no judge configured: {exc}"
