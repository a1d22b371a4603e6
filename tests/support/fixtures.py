"""Shared pytest fixtures for the stand-ins.

Expose them to every test by importing in ``tests/conftest.py``::

    from tests.support.fixtures import stand_in_llm  # noqa: F401
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.stand_in_llm import StandInLLM


@pytest.fixture
def stand_in_llm() -> Iterator[StandInLLM]:
    """A started :class:`StandInLLM` (empty script), stopped after the test."""
    with StandInLLM() as server:
        yield server
