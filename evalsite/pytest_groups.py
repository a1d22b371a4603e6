"""The Django side of the pytest plugin (:mod:`evalsite.pytest_plugin`): one eval set run as one
eval run, stored in Evalsite's database like ``evalsite eval``, its cases handed to test items.

Imported only when the plugin is used (an option or the decorator), so a pytest session that
does not use it never sets Django up.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest


def setup_django(db: str | None = None) -> None:
    """Set Django up with Evalsite's settings (unless settings are configured already, e.g. by
    pytest-django with ``evalsite.settings``), on ``db`` when given (else ``$EVALSITE_DB`` or
    the default data folder: the database ``evalsite eval`` uses).

    Raises:
        pytest.UsageError: Django is configured with settings that are not Evalsite's.
    """
    if db:
        os.environ["EVALSITE_DB"] = os.path.abspath(db)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    from django.apps import apps

    if not apps.ready:
        os.environ.setdefault("EVALSITE_COMMAND", "eval")  # the command-line settings: no web stack
        import django

        django.setup()
    from django.conf import settings

    if "apps.evals" not in settings.INSTALLED_APPS:
        raise pytest.UsageError(
            f"the evalsite plugin stores runs in Evalsite's database, but Django is configured with "
            f"{os.environ.get('DJANGO_SETTINGS_MODULE')!r}: run the eval cases in a pytest session of their own "
            "(e.g. with -p no:django)"
        )


@contextmanager
def db_access(config: pytest.Config) -> Iterator[None]:
    """Database access inside a pytest-django session (which blocks it outside ``django_db``
    tests); a no-op without pytest-django."""
    blocker: Any = None
    if config.pluginmanager.hasplugin("django"):
        try:
            from pytest_django.plugin import blocking_manager_key

            blocker = config.stash.get(blocking_manager_key, None)
        except ImportError:  # an older pytest-django: its blocker is not reachable this way
            blocker = None
    with blocker.unblock() if blocker is not None else nullcontext():
        yield


@dataclass(slots=True)
class GroupRequest:
    """What one group of eval-case items runs (from the command-line options or the decorator).

    Attributes:
        label: The group's name in reports (e.g. ``qa.jsonl`` or the test function's name).
        eval_set: A case-bank path or an imported set's name.
        target: A target id declared in ``agents``, a ``TargetSpec``, or a plain callable.
        agents: The agents folder (for a target id).
        variant, split, allow_test, scorers: As ``evalsite eval``.
        concurrency, timeout_s, repeat: As ``evalsite eval`` (``None``: a run's default,
            :class:`apps.evals.runs.config.RunConfig`).
        gates: Gate expressions (``pass_rate>=0.8``, ``regressions<=0``...).
        baseline: ``RUN_ID``, ``pinned`` or ``latest[:VARIANT]``.
    """

    label: str
    eval_set: str
    target: Any
    agents: str | None = None
    variant: str | None = None
    split: str = "dev"
    allow_test: bool = False
    scorers: list[Any] = field(default_factory=list)
    gates: list[str] = field(default_factory=list)
    baseline: str | None = None
    concurrency: int | None = None
    timeout_s: float | None = None
    repeat: int | None = None


class CaseGroup:
    """One eval set run against one target as one eval run.

    :meth:`prepare` (at collection) checks everything and lists the cases; the first item that
    needs a result calls :meth:`run`, which executes every selected case concurrently and
    stores the run; :meth:`conclude` (at the end of the session) checks the gates against the
    baseline and writes the summary.
    """

    def __init__(self, request: GroupRequest, config: pytest.Config) -> None:
        self.request = request
        self.config = config
        self.keys: list[tuple[str, int, str]] = []
        self.selected: set[tuple[str, int]] | None = None
        self.results: dict[tuple[str, int], Any] = {}
        self.outcome: Any = None
        self.error: BaseException | None = None
        self.conclusion: Any = None
        self.failures_tolerated = 0
        self._lock = threading.Lock()
        self._spec: Any = None
        self._scorers: list[Any] = []
        self._gates: list[Any] = []
        self._baseline: Any = None
        self._eval_set: Any = None
        self._variant: str | None = None
        self._config: Any = None

    @property
    def repeat(self) -> int:
        """Runs of each case (known once :meth:`prepare` checked the request)."""
        return int(self._config.repeat)

    @property
    def gated(self) -> bool:
        """Gates decide this group's outcome (a failing case alone does not fail the session)."""
        return bool(self._gates)

    def prepare(self) -> list[tuple[str, int, str]]:
        """Check the request, import the set, resolve the baseline; the ``(case id, repeat, split)`` keys.

        Raises:
            pytest.UsageError: Anything ``evalsite eval`` refuses (unknown target, bad set, held-out
                split without ``allow_test``, bad gate, unusable baseline), with its message.
        """
        from apps.evals.cli.console import UsageError, ensure_database, load_set
        from apps.evals.cli.gating import parse_cli_gates, resolve_baseline_option
        from apps.evals.runs.config import RunConfig
        from apps.evals.runs.liveness import mark_stale_runs
        from apps.evals.runs.prepare import check_gate_metrics
        from apps.evals.sets.cases import set_cases
        from evalcore.discovery import UnknownVariantError
        from evalcore.gates import GateError
        from evalcore.scorer_registry import resolve_scorers
        from evalcore.scorers.base import ScorerSpecError
        from evalcore.splits import guard_split

        req = self.request
        try:
            given = {"concurrency": req.concurrency, "timeout_s": req.timeout_s, "repeat": req.repeat}
            self._config = RunConfig.parse({k: v for k, v in given.items() if v is not None})
            with db_access(self.config):
                self._gates = parse_cli_gates(req.gates, req.baseline)
                self._spec = self._target_spec()
                self._scorers = resolve_scorers(req.scorers or list(self._spec.scorers))
                _, self._variant = self._spec.resolve(req.variant)
                check_gate_metrics(self._gates, self._scorers)
                guard_split(req.split, req.allow_test)
                ensure_database()
                mark_stale_runs(force=True)
                self._eval_set, _ = load_set(req.eval_set, mapping=None, auto_id=False)
                self._baseline = resolve_baseline_option(
                    req.baseline, eval_set=self._eval_set, target_id=self._spec.id, split=req.split
                )
                cases = set_cases(self._eval_set, req.split)
        except (UsageError, GateError, ValueError, UnknownVariantError, ScorerSpecError, TypeError) as exc:
            raise pytest.UsageError(f"evalsite {req.label}: {exc}") from None
        if not cases:
            raise pytest.UsageError(f"evalsite {req.label}: set {self._eval_set.name!r} has no case in {req.split!r}")
        self.keys = [(case.id, r, case.split or "") for case in cases for r in range(self.repeat)]
        return self.keys

    def _target_spec(self) -> Any:
        from apps.evals.cli.console import UsageError
        from apps.evals.runs.prepare import TargetChoiceError, choose_target
        from evalcore.discovery import TargetSpec, discover_targets

        target = self.request.target
        if isinstance(target, TargetSpec):
            return target
        if callable(target):
            return TargetSpec(id=getattr(target, "__name__", "target"), target=target)
        agents = self.request.agents or os.environ.get("EVALSITE_AGENTS_DIR") or "agents"
        try:
            discovery = discover_targets(agents)
            return choose_target(discovery.targets, target, self.request.eval_set, agents_dir=agents)
        except (FileNotFoundError, TargetChoiceError) as exc:
            raise UsageError(str(exc)) from None

    def result(self, key: tuple[str, int]) -> Any:
        """The case's :class:`evalcore.types.CaseResult`, running the group first if it has not run.

        Raises:
            RuntimeError: The run failed (the first item to ask sees the cause).
        """
        with self._lock:
            if self.outcome is None and self.error is None:
                try:
                    self.run()
                except Exception as exc:
                    self.error = exc
                    raise
        if self.error is not None:
            raise RuntimeError(f"the eval run of {self.request.label} failed: {self.error}") from self.error
        return self.results.get(key)

    def run(self) -> None:
        """Execute the selected cases as one eval run, stored like ``evalsite eval`` stores it."""
        from apps.evals.models import EvalRunStatus
        from apps.evals.runs.execution import execute_eval_run
        from apps.evals.runs.prepare import cli_executor_config, prepare_eval_run

        req = self.request
        extra: dict[str, Any] = {**cli_executor_config(), "runner": "pytest"}
        if self.selected is not None and len(self.selected) < len(self.keys):
            extra["case_ids"] = sorted({case_id for case_id, _ in self.selected})
        config = self._config.updated(**extra)
        with db_access(self.config):
            eval_run = prepare_eval_run(
                eval_set=self._eval_set,
                spec=self._spec,
                variant=req.variant,
                split=req.split,
                allow_test=req.allow_test,
                scorers=self._scorers,
                config=config,
                status=EvalRunStatus.RUNNING,
            )

            def keep(result: Any) -> None:
                self.results[(result.case_id, result.run.repeat_index)] = result

            self.outcome = execute_eval_run(eval_run, self._spec, scorers=self._scorers, on_result=keep)

    def conclude(self, *, summary_md: str | None, portal_url: str | None, append: bool) -> Any:
        """Check the gates (against the baseline) and write the Markdown summary; ``None`` when
        the group never ran."""
        if self.outcome is None:
            return None
        from apps.evals.cli.gating import conclude

        with db_access(self.config):
            self.conclusion = conclude(
                self.outcome.eval_run,
                self.outcome.report,
                self._gates,
                self._baseline,
                summary_md=summary_md,
                portal_url=portal_url,
                append_summary=append,
            )
        return self.conclusion

    def headline(self) -> str:
        """``qa.jsonl · shout: eval run ID, 8 cases: 7 passed, 1 failed, 0 errored, 0 unscored (87.5%)``."""
        report = self.outcome.report
        who = " · ".join(x for x in (self.request.label, self._spec.id, self._variant) if x)
        return (
            f"{who}: eval run {self.outcome.eval_run.pk}, {report.n} case(s): {report.passed} passed, "
            f"{report.failed} failed, {report.errored} errored, {report.unscored} unscored "
            f"(pass rate {report.pass_rate * 100:.1f}%)"
        )


def resolve_path(text: str, *, base: Path | None) -> str:
    """A set path relative to ``base`` (the test file's folder) when a file is there; else as given
    (a path from the current folder, or an imported set's name)."""
    if base is not None and not Path(text).is_absolute() and (base / text).exists():
        return str(base / text)
    return text
