"""pytest plugin: eval cases as test items, stored as an Evalsite run, the session judged by gates.

Registered through the ``pytest11`` entry point (``pip install evalsite`` is enough). Two ways in:

* options: ``pytest --evalsite-set sets/qa.jsonl --evalsite-target qa-agent [--evalsite-agents DIR]
  [--evalsite-gate 'pass_rate>=0.8'] [--evalsite-baseline pinned] [--evalsite-summary-md FILE]``;
* the decorator :func:`cases` on a test function (``evalsite.cases`` is the same function)::

      @evalsite.cases("sets/qa.jsonl", target="qa-agent", agents="agents", gates=["pass_rate>=0.8"])
      def test_qa(case):
          assert len(case.output) < 2000  # optional extra checks on each passing case

Each case (and repeat) is one test item: passed when the case passed, failed when it failed,
an error when it errored and skipped when nothing judged it (the counts ``evalsite eval``
prints). The set runs as one eval run (concurrently, ``--evalsite-concurrency``) when its first
item runs, in the database ``evalsite eval`` uses (``--evalsite-db`` / ``$EVALSITE_DB``), so it
appears in the portal's runs, compare and trends.

Gates: with gates (``--evalsite-gate`` for every group, ``gates=`` for one), the gates decide:
a failing case is reported but does not fail the session when every gate holds, and a gate that
fails fails it (exit code 1). Without gates each failing case fails the session, as a test does.

Every setting has one precedence, for the decorator and ``--evalsite-set`` alike: the
decorator's argument, then the ``--evalsite-*`` option, then its environment variable
(``EVALSITE_CONCURRENCY``, ``EVALSITE_TIMEOUT``...: :data:`OPTIONS`), then the default.

Inert unless used: without an ``--evalsite-*`` option or a decorated test nothing here imports
Django or touches a database (the plugin is loaded into every pytest session of an environment
where Evalsite is installed). pytest-xdist (``-n``) is refused for eval cases: a set runs as one
eval run in one process, with its own concurrency.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from evalcore.typed_numbers import ascii_integer, ascii_number

_SPEC_ATTR = "__evalsite_cases__"
_GROUPS = pytest.StashKey[list[Any]]()


def cases(
    eval_set: str,
    *,
    target: Any,
    agents: str | None = None,
    variant: str | None = None,
    split: str | None = None,
    allow_test: bool | None = None,
    scorers: Iterable[Any] = (),
    gates: Iterable[str] = (),
    baseline: str | None = None,
    concurrency: int | None = None,
    timeout: float | None = None,
    repeat: int | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Mark a test function so each case of ``eval_set`` becomes a test item.

    Args:
        eval_set: A case-bank file (relative to the test file's folder when it is there, else to
            the current folder) or an imported set's name.
        target: A target id declared in ``agents``, a ``TargetSpec``, or a plain callable.
        agents: The agents folder (relative like ``eval_set``; default ``--evalsite-agents``,
            ``$EVALSITE_AGENTS_DIR`` or ``agents``).
        variant, split, allow_test, scorers, concurrency, timeout, repeat: As ``evalsite eval``.
        gates: Gate expressions for this set (``--evalsite-gate`` ones are added).
        baseline: ``RUN_ID``, ``pinned`` or ``latest[:VARIANT]`` (default ``--evalsite-baseline``).

    An argument left out (``None``, or no scorers) takes the command line's ``--evalsite-*``
    option, else its environment variable, else the default (see :data:`OPTIONS`); a decorator
    argument given wins over both, so a test can pin what it needs.

    The function is called for each *passing* case with an :class:`EvalsiteCase` when it takes
    an argument (extra assertions), with none otherwise.
    """

    fields = {
        "eval_set": eval_set,
        "target": target,
        "agents": agents,
        "variant": variant,
        "split": split,
        "allow_test": allow_test,
        "scorers": list(scorers) or None,
        "gates": list(gates),
        "baseline": baseline,
        "concurrency": concurrency,
        "timeout_s": timeout,
        "repeat": repeat,
    }

    def mark(func: Callable[..., Any]) -> Callable[..., Any]:
        setattr(func, _SPEC_ATTR, fields)
        return func

    return mark


@dataclass(frozen=True, slots=True)
class EvalsiteCase:
    """What a decorated test function receives for a passing case.

    Attributes:
        case_id, repeat_index, split: The case.
        input, expected: The case's input and expected value.
        output: The target's answer.
        scores: ``{score name: value}``.
        result: The full :class:`evalcore.types.CaseResult`.
    """

    case_id: str
    repeat_index: int
    split: str
    input: Any
    expected: Any
    output: Any
    scores: dict[str, Any]
    result: Any


class CaseFailed(AssertionError):
    """A case that failed, errored or could not run (the message says why: scores, error)."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("evalsite", "Evalsite: eval cases as test items")
    add = group.addoption
    add("--evalsite-set", help="case-bank file or imported set name: each case becomes a test item")
    add("--evalsite-target", help="target id (from --evalsite-agents)")
    add("--evalsite-agents", help="agents folder declaring targets (default $EVALSITE_AGENTS_DIR or ./agents)")
    add("--evalsite-variant", help="target variant ($EVALSITE_VARIANT)")
    add(
        "--evalsite-split",
        default=None,
        choices=["train", "dev", "test", "all"],
        help="split ($EVALSITE_SPLIT, default dev)",
    )
    add(
        "--evalsite-allow-test",
        action="store_true",
        default=None,
        help="allow the held-out test split ($EVALSITE_ALLOW_TEST=1)",
    )
    add("--evalsite-scorer", action="append", default=[], help="scorer spec (repeatable)")
    add("--evalsite-gate", action="append", default=[], help="gate, e.g. 'pass_rate>=0.8', 'regressions<=0'")
    add(
        "--evalsite-baseline",
        help="RUN_ID, pinned or latest[:VARIANT]: compare with it and allow baseline gates ($EVALSITE_BASELINE)",
    )
    add("--evalsite-summary-md", metavar="FILE", help="write the Markdown summary of every eval run here")
    add("--evalsite-portal-url", help="the portal's address, for links in the summary ($EVALSITE_PORTAL_URL)")
    add("--evalsite-db", help="Evalsite's SQLite database (default $EVALSITE_DB or the data folder's)")
    # the defaults are a run's (apps.evals.runs.config.RunConfig), read only once the plugin is used
    add(
        "--evalsite-concurrency",
        type=ascii_integer,
        help="cases run at once ($EVALSITE_CONCURRENCY, default as evalsite eval)",
    )
    add(
        "--evalsite-timeout",
        type=ascii_number,
        help="per-case timeout in seconds ($EVALSITE_TIMEOUT, default as evalsite eval)",
    )
    add("--evalsite-repeat", type=ascii_integer, help="runs per case ($EVALSITE_REPEAT, default as evalsite eval)")


@dataclass(frozen=True, slots=True)
class Option:
    """Where one run setting of a group comes from, after the decorator's own argument.

    Attributes:
        dest: The ``--evalsite-*`` option's name as pytest stores it.
        env: The environment variable read when the option is not given (``None``: none).
        default: The value when nothing sets it.
        parse: Turns the environment variable's text into a value (raises ``ValueError``).
    """

    dest: str
    env: str | None
    default: Any
    parse: Callable[[str], Any] = str


def _flag(text: str) -> bool:
    """An environment flag: 1/true/yes/on or 0/false/no/off (any case)."""
    word = text.strip().lower()
    if word in ("1", "true", "yes", "on"):
        return True
    if word in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"expected 1 or 0, got {text!r}")


def _split(text: str) -> str:
    if text not in ("train", "dev", "test", "all"):
        raise ValueError(f"expected train, dev, test or all, got {text!r}")
    return text


OPTIONS: dict[str, Option] = {
    "agents": Option("evalsite_agents", "EVALSITE_AGENTS_DIR", None),
    "variant": Option("evalsite_variant", "EVALSITE_VARIANT", None),
    "split": Option("evalsite_split", "EVALSITE_SPLIT", "dev", _split),
    "allow_test": Option("evalsite_allow_test", "EVALSITE_ALLOW_TEST", False, _flag),
    "scorers": Option("evalsite_scorer", None, []),
    "baseline": Option("evalsite_baseline", "EVALSITE_BASELINE", None),
    "concurrency": Option("evalsite_concurrency", "EVALSITE_CONCURRENCY", None, ascii_integer),
    "timeout_s": Option("evalsite_timeout", "EVALSITE_TIMEOUT", None, ascii_number),
    "repeat": Option("evalsite_repeat", "EVALSITE_REPEAT", None, ascii_integer),
}
"""Each group setting's sources after the decorator argument, in order: the command line, the
environment, the default (``None``: a run's own, ``apps.evals.runs.config.RunConfig``). The same
table serves ``--evalsite-set`` and the decorator."""


def resolve_options(config: pytest.Config, given: dict[str, Any]) -> dict[str, Any]:
    """The group's settings: each the decorator's argument when given (not ``None``), else the
    ``--evalsite-*`` option when given, else its environment variable when set, else the default.

    Args:
        config: The pytest config (for the command-line options).
        given: The decorator's arguments (``{}`` for ``--evalsite-set``); other keys pass through.

    Raises:
        pytest.UsageError: An environment variable that does not parse (named with its value).
    """
    fields = dict(given)
    for name, option in OPTIONS.items():
        if fields.get(name) is not None:
            continue
        value = config.getoption(option.dest)
        if value is None or value == []:
            raw = os.environ.get(option.env) if option.env else None
            if raw is not None and raw.strip() != "":
                try:
                    value = option.parse(raw.strip())
                except ValueError as exc:
                    raise pytest.UsageError(f"${option.env}: {exc}") from None
            else:
                value = option.default
        fields[name] = value
    return fields


_SPLITS = ("train", "dev", "test", "unsplit")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "evalsite: an Evalsite eval case (added by the evalsite plugin)")
    for split in _SPLITS:
        config.addinivalue_line("markers", f"evalsite_{split}: an Evalsite eval case of the {split} split")
    config.stash[_GROUPS] = []
    config.pluginmanager.register(SessionState(config), "evalsite-session")
    if config.getoption("evalsite_set") and _xdist_workers(config):
        raise pytest.UsageError("--evalsite-set runs as one eval run in one process: drop -n (pytest-xdist)")


def _xdist_workers(config: pytest.Config) -> bool:
    return bool(getattr(config.option, "numprocesses", None)) or hasattr(config, "workerinput")


def _groups(config: pytest.Config) -> list[Any]:
    return config.stash.get(_GROUPS, [])


def _new_group(config: pytest.Config, label: str, fields: dict[str, Any]) -> Any:
    from evalsite.pytest_groups import CaseGroup, GroupRequest, setup_django

    setup_django(config.getoption("evalsite_db"))
    fields = resolve_options(config, fields)
    fields["gates"] = [*fields.get("gates", []), *config.getoption("evalsite_gate")]
    group = CaseGroup(GroupRequest(label=label, **fields), config)
    _groups(config).append(group)
    return group


def pytest_pycollect_makeitem(collector: pytest.Collector, name: str, obj: object) -> Any:
    if not inspect.isfunction(obj) or not isinstance(obj.__dict__.get(_SPEC_ATTR), dict):
        return None
    return EvalCasesCollector.from_parent(collector, name=name, func=obj)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Add the ``--evalsite-set`` cases before ``-k`` / ``-m`` deselect anything."""
    if config.getoption("evalsite_set"):
        items.extend(_option_items(session, config))


def _option_items(session: pytest.Session, config: pytest.Config) -> list[pytest.Item]:
    set_arg = config.getoption("evalsite_set")
    fields = {"eval_set": set_arg, "target": config.getoption("evalsite_target")}
    group = _new_group(config, Path(set_arg).name, fields)
    group.from_options = True
    name = f"evalsite[{Path(set_arg).name}]"
    node = EvalSetNode.from_parent(session, name=name, nodeid=name, group=group)
    return list(node.collect())


def _items(parent: pytest.Collector, group: Any, func: Callable[..., Any] | None) -> Iterator[EvalCaseItem]:
    for case_id, repeat, split in group.prepare():
        name = case_id + (f"#{repeat}" if group.repeat > 1 else "")
        item = EvalCaseItem.from_parent(parent, name=name, group=group, key=(case_id, repeat), func=func)
        item.add_marker(pytest.mark.evalsite)
        item.add_marker(getattr(pytest.mark, f"evalsite_{split if split in _SPLITS else 'unsplit'}"))
        yield item


class EvalSetNode(pytest.Collector):
    """The cases of ``--evalsite-set`` (a collector under the session)."""

    def __init__(self, *, group: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.group = group

    def collect(self) -> Iterable[pytest.Item]:
        return list(_items(self, self.group, None))


class EvalCasesCollector(pytest.Collector):
    """The cases of a function decorated with :func:`cases`."""

    def __init__(self, *, func: Callable[..., Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.func = func

    def collect(self) -> Iterable[pytest.Item]:
        from evalsite.pytest_groups import resolve_path

        if _xdist_workers(self.config):
            raise pytest.UsageError(f"{self.name}: evalsite cases run as one eval run: drop -n (pytest-xdist)")
        fields = dict(getattr(self.func, _SPEC_ATTR))
        base = self.path.parent
        fields["eval_set"] = resolve_path(fields["eval_set"], base=base)
        if fields.get("agents"):
            fields["agents"] = resolve_path(fields["agents"], base=base)
        group = _new_group(self.config, self.name, fields)
        return list(_items(self, group, self.func))


class EvalCaseItem(pytest.Item):
    """One case (and repeat) of a group: its verdict is the test's outcome."""

    def __init__(self, *, group: Any, key: tuple[str, int], func: Callable[..., Any] | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.group = group
        self.key = key
        self.func = func
        self.user_failed = False

    def setup(self) -> None:
        __tracebackhide__ = True
        result = self.group.result(self.key)
        if result is None:
            raise CaseFailed(f"case {self.key[0]!r} has no result (the run stopped before it)")
        self.result = result
        if result.status.value == "errored":
            raise CaseFailed(_explain(result))

    def runtest(self) -> None:
        __tracebackhide__ = True
        status = self.result.status.value
        if status == "unscored":
            pytest.skip("unscored: no scorer gave this case a verdict")
        if status == "failed":
            raise CaseFailed(_explain(self.result))
        if self.func is not None:
            self.user_failed = True  # until the function returns
            if inspect.signature(self.func).parameters:
                self.func(_case_view(self.result))
            else:
                self.func()
            self.user_failed = False

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, CaseFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, f"{self.group.request.label}::{self.name}"


def _case_view(result: Any) -> EvalsiteCase:
    return EvalsiteCase(
        case_id=result.case_id,
        repeat_index=result.run.repeat_index,
        split=result.case.split or "",
        input=result.case.input,
        expected=result.case.expected,
        output=result.run.output,
        scores={s.name: s.value for s in result.scores},
        result=result,
    )


def _explain(result: Any) -> str:
    status = result.status.value
    lines = [f"case {result.case_id!r} {status}"]
    if result.run.error is not None:
        lines.append(f"target error: {result.run.error.type}: {result.run.error.message}")
    for score in result.scores:
        why = score.error or score.explanation or ""
        lines.append(f"  {score.name} = {score.value!r}" + (f" ({why})" if why else ""))
    output = repr(result.run.output)
    lines.append(f"  output: {output[:500]}" + ("…" if len(output) > 500 else ""))
    return "\n".join(lines)


class SessionState:
    """The session's bookkeeping (a plugin object per pytest config, so nothing leaks between
    sessions run in one process): which failures the gates decide, the end-of-session gates."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.items: dict[str, EvalCaseItem] = {}
        self.other_failures = 0

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """After ``-k`` / ``-m``: each group runs only its selected cases."""
        for group in _groups(self.config):
            group.selected = {it.key for it in items if isinstance(it, EvalCaseItem) and it.group is group}
        self.items = {it.nodeid: it for it in items if isinstance(it, EvalCaseItem)}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if not report.failed:
            return
        item = self.items.get(report.nodeid)
        if item is not None and item.group.gated and not item.user_failed and item.group.error is None:
            item.group.failures_tolerated += 1  # the gates decide
        else:
            self.other_failures += 1

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        groups = [g for g in _groups(self.config) if g.outcome is not None]
        if not groups:
            return
        portal = self.config.getoption("evalsite_portal_url") or os.environ.get("EVALSITE_PORTAL_URL") or None
        summary = self.config.getoption("evalsite_summary_md")
        failed = False
        for index, group in enumerate(groups):
            failed |= group.conclude(summary_md=summary, portal_url=portal, append=index > 0).failed
        if failed:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        elif session.exitstatus == pytest.ExitCode.TESTS_FAILED and self.other_failures == 0:
            session.exitstatus = pytest.ExitCode.OK  # only gated cases failed, and every gate held

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        groups = [g for g in _groups(self.config) if g.conclusion is not None]
        if not groups:
            return
        from rich.text import Text

        terminalreporter.write_sep("=", "evalsite")
        for group in groups:
            terminalreporter.write_line(group.headline())
            for line in group.conclusion.lines:
                terminalreporter.write_line(Text.from_markup(line).plain)
            if group.gated and group.failures_tolerated and not group.conclusion.failed:
                terminalreporter.write_line(
                    f"every gate held: its {group.failures_tolerated} failing case(s) do not fail the session"
                )
