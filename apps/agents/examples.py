"""Example inputs the playground shows, from a layer above it.

The playground sits below ``evals`` (which may import it, never the reverse), yet it offers eval
data: a JSON target's input template comes from the first case of the set the target is usually
run on, and "Open in playground" on a case types that case's input into the chat. The evals app
answers these questions by registering an :class:`ExampleSource` at start-up
(``EvalsConfig.ready``); until one is registered (the agents app alone) there are no examples.
"""

from __future__ import annotations

from typing import Any, Protocol

from evalcore.discovery import TargetSpec


class _NoInput:
    def __repr__(self) -> str:
        return "NO_INPUT"


NO_INPUT: Any = _NoInput()
"""Returned when there is no example (``None`` is a valid JSON input, so it cannot say that)."""


class ExampleSource(Protocol):
    """Where example inputs come from."""

    def sample_input(self, target_id: str, spec: TargetSpec | None) -> Any:
        """An input ``target_id`` is usually given (``spec``: its declaration, if it loads), or
        :data:`NO_INPUT`."""
        ...

    def case_input(self, case_pk: int) -> Any:
        """The input of the stored case ``case_pk``, or :data:`NO_INPUT` (no such case)."""
        ...


class _NoExamples:
    def sample_input(self, target_id: str, spec: TargetSpec | None) -> Any:
        return NO_INPUT

    def case_input(self, case_pk: int) -> Any:
        return NO_INPUT


_source: ExampleSource = _NoExamples()


def set_example_source(source: ExampleSource) -> None:
    """Make ``source`` answer the playground's example questions (called once, at start-up)."""
    global _source
    _source = source


def example_source() -> ExampleSource:
    """The registered source (one that has no examples when none is)."""
    return _source
