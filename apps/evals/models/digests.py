"""A finished run's compact per-case digest (issue 30, floor 5): what the compare page needs of
each result, as numpy arrays in one blob, so two million-result runs are compared by merging two
arrays instead of joining two million rows. Written by :func:`apps.evals.results.digest.store_digest`
when a run finishes; read by :mod:`apps.evals.queries.compare_digest`."""

from __future__ import annotations

from django.db import models

from apps.evals.models.runs import EvalRun


class RunDigest(models.Model):
    """One run's digest and the state of the run it was built from (a digest whose stamp no longer
    matches the run, after a resume or any new result, is ignored and rebuilt).

    Attributes:
        n_done, status: The run's counters when the digest was built.
        n_results: Results the digest holds.
        max_result_id: The run's highest result id then (0: none).
        data: The arrays (``numpy.savez``; see :mod:`apps.evals.results.digest`).
    """

    eval_run = models.OneToOneField(EvalRun, on_delete=models.CASCADE, primary_key=True, related_name="digest")
    version = models.PositiveSmallIntegerField(default=1)
    n_done = models.IntegerField()
    status = models.CharField(max_length=16)
    n_results = models.IntegerField()
    max_result_id = models.BigIntegerField()
    built = models.DateTimeField(auto_now=True)
    data = models.BinaryField()

    def __str__(self) -> str:
        return f"digest of {self.eval_run_id} ({self.n_results} results)"
