"""Events the evals app emits for whoever listens (a low module: it imports nothing of ours).

:data:`results_written` is sent by the result store after the commit that wrote results of an
eval run, once per run, with ``eval_run_id`` (a ``str``). The live pages' consumers subscribe to
wake their sockets (connected in ``EvalsConfig.ready``); the store never knows who listens.

:data:`eval_run_finished` is sent once an eval run's end (``finished``, ``failed`` or
``interrupted``) is committed; the OTLP export listens (:mod:`apps.evals.exports.otel`).
"""

from __future__ import annotations

from django.dispatch import Signal

results_written = Signal()
"""Sent with ``eval_run_id=<str>`` after results of that eval run were committed."""

eval_run_finished = Signal()
"""Sent with ``eval_run_id=<str>`` and ``status=<str>`` after an eval run's end was committed."""
