"""The LLM-backed user of a stored run, built from its :class:`~apps.evals.runs.config.SimulatorConfig`
by whoever executes it: the CLI (a new run, or a resume without ``--simulator-*``), the task
worker (portal and API runs) and the queue's shards (:meth:`apps.evals.runs.plan.RunPlan.run`).

The model is built as the judge's is (:func:`evalcore.runtime.openai_client.model_from_settings`):
the API key from the executor's environment (``$EVALSITE_JUDGE_API_KEY_ENV`` honoured), never
from the stored config.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from django.conf import settings

from apps.evals.runs.config import RunConfig, RunConfigError, SimulatorConfig
from evalcore.errors import InvalidInputError
from evalcore.judge.cache import SqliteJudgeCache
from evalcore.redact import register_secret, strip_userinfo, url_secrets
from evalcore.runtime.models import ModelError
from evalcore.simulator import LLMUser

SIMULATOR_CACHE_FILE = "user_simulator_cache.sqlite3"
"""The simulated users' reply cache, in the data folder (beside the judge's)."""


class SimulatorSetupError(InvalidInputError):
    """The run's user simulator cannot be built here (no such model class, no API key, a bad URL)."""


def default_simulator_base_url(environ: Mapping[str, str] | None = None) -> str:
    """The endpoint of a simulator given none: ``$EVALSITE_JUDGE_BASE_URL``, else
    ``$EVALSITE_MODEL_BASE_URL`` (``""``: the model class's default)."""
    env = os.environ if environ is None else environ
    return env.get("EVALSITE_JUDGE_BASE_URL") or env.get("EVALSITE_MODEL_BASE_URL") or ""


def build_user_simulator(config: SimulatorConfig, *, base_url: str | None = None) -> LLMUser:
    """The :class:`~evalcore.simulator.LLMUser` that ``config`` describes.

    Args:
        config: The run's simulator.
        base_url: The endpoint to call when it differs from the stored one (the CLI's, with the
            credentials the stored one lost); default ``config.base_url``, else
            :func:`default_simulator_base_url`.

    Raises:
        SimulatorSetupError: The model cannot be built (the message names the simulator model).
    """
    # lazy: it imports the openai SDK (~0.5 s), needed only when a simulator is asked for
    from evalcore.runtime.openai_client import model_from_settings

    env = dict(os.environ)
    url = base_url or config.base_url or default_simulator_base_url(env)
    for secret in url_secrets(url):
        register_secret(secret)  # a password in the URL is redacted like a configured key
    env["EVALSITE_MODEL"] = config.model
    if url:
        env["EVALSITE_MODEL_BASE_URL"] = url
    if env.get("EVALSITE_JUDGE_API_KEY_ENV"):
        env["EVALSITE_MODEL_API_KEY_ENV"] = env["EVALSITE_JUDGE_API_KEY_ENV"]
    try:
        model = model_from_settings(env)
    except ModelError as exc:
        raise SimulatorSetupError(f"the user simulator ({config.model}): {exc}", field="simulator.model") from None
    cache = None
    if config.cache:
        settings.DATA_DIR.mkdir(parents=True, exist_ok=True)
        cache = SqliteJudgeCache(settings.DATA_DIR / SIMULATOR_CACHE_FILE)
    return LLMUser(model, cache=cache, seed=config.seed)


def simulator_config_of(
    model: str | None, *, base_url: str | None = None, seed: int | None = None, cache: bool = True
) -> SimulatorConfig | None:
    """The :class:`~apps.evals.runs.config.SimulatorConfig` a start request asks for (the portal's
    form, the API): ``None`` when ``model`` is blank; the endpoint kept without credentials (the
    key is read from the task worker's environment, never stored).

    Raises:
        RunConfigError: ``simulator.model`` missing while other simulator fields are given, or
            a value out of range (a negative seed), naming the field.
    """
    if not (model or "").strip():
        if base_url or seed is not None:
            given = "simulator.base_url" if base_url else "simulator.seed"
            raise RunConfigError(f"{given} needs simulator.model", field="simulator.model", value=model)
        return None
    parsed = RunConfig.parse(
        {"simulator": {"model": model, "base_url": strip_userinfo(base_url or ""), "seed": seed or 0, "cache": cache}}
    )
    return parsed.simulator
