"""People's reviews of results, their history, and who is asked to review what."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from apps.evals.models.runs import EvalResult, EvalRun


class ReviewVerdict(models.TextChoices):
    """A person's verdict on a result."""

    PASS = "pass", "pass"
    FAIL = "fail", "fail"
    UNSURE = "unsure", "unsure"


class Review(models.Model):
    """A person's grade of one result: a verdict, 0..5 scores on the judge's rubric axes
    (``evalcore.judge.AXES``) and a comment, each optional but not all three. One per (result,
    reviewer): a reviewer edits their own; every edit keeps the state it replaces as a
    :class:`ReviewRevision`.

    ``eval_run`` and ``case_id`` repeat the result's, so a run's or a set's reviews are read
    without a join through the results.
    """

    result = models.ForeignKey(EvalResult, on_delete=models.CASCADE, related_name="reviews")
    eval_run = models.ForeignKey(EvalRun, on_delete=models.CASCADE, related_name="reviews")
    case_id = models.CharField(max_length=300)
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="eval_reviews")
    # "" for a review that is only a comment or axis scores: it votes in no verdict figure
    verdict = models.CharField(max_length=8, choices=ReviewVerdict.choices, blank=True)
    axis_scores = models.JSONField(default=dict, blank=True)
    comment = models.TextField(blank=True, default="")
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["result", "created"]
        permissions = [("review_result", "Can review eval results")]
        constraints = [models.UniqueConstraint(fields=["result", "reviewer"], name="review_unique_reviewer")]
        indexes = [models.Index(fields=["eval_run", "case_id"], name="review_run_case")]

    def __str__(self) -> str:
        return f"{self.eval_run_id}:{self.case_id} {self.verdict} by {self.reviewer_id}"


class ReviewRevision(models.Model):
    """The state of a review before one of its edits (the history; newest last)."""

    review = models.ForeignKey(Review, on_delete=models.CASCADE, related_name="revisions")
    verdict = models.CharField(max_length=8, choices=ReviewVerdict.choices, blank=True)
    axis_scores = models.JSONField(default=dict, blank=True)
    comment = models.TextField(blank=True, default="")
    saved = models.DateTimeField(help_text="when this state was saved (the review's updated time then)")
    replaced = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["review", "id"]


class ReviewAssignment(models.Model):
    """A result handed to a person to review (the queue's "assigned to me" filter)."""

    result = models.ForeignKey(EvalResult, on_delete=models.CASCADE, related_name="assignments")
    eval_run = models.ForeignKey(EvalRun, on_delete=models.CASCADE, related_name="review_assignments")
    assignee = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="review_assignments")
    assigned_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["result", "assignee"], name="assignment_unique")]
        indexes = [models.Index(fields=["eval_run", "assignee"], name="assignment_run_assignee")]
