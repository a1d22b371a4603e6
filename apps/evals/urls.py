"""Pages of the evals app (mounted at the site root).

URL names say ``eval_run`` for an eval run (``traces.Run`` is a run): ``evals:eval_runs``,
``evals:eval_run``, ``evals:start_eval_run``, ``evals:resume_eval_run``.
"""

from __future__ import annotations

from django.urls import path

from apps.evals.views import (
    compare,
    eval_runs,
    figures,
    ledger,
    reviews,
    rules,
    run_edits,
    set_reviews,
    sets,
    start,
    status,
)

app_name = "evals"

urlpatterns = [
    path("", eval_runs.home, name="home"),
    path("runs/", eval_runs.eval_run_list, name="eval_runs"),
    path("runs/new/", start.start_eval_run, name="start_eval_run"),
    path("runs/new/check/", start.start_eval_run_check, name="start_eval_run_check"),
    path("runs/<str:run_id>/", eval_runs.eval_run_detail, name="eval_run"),
    path("runs/<str:run_id>/resume/", eval_runs.resume_eval_run, name="resume_eval_run"),
    path("runs/<str:run_id>/edit/", run_edits.edit_eval_run_view, name="edit_eval_run"),
    path("runs/<str:run_id>/pin/", run_edits.pin_eval_run, name="pin_eval_run"),
    path("runs/<str:run_id>/delete/", run_edits.delete_eval_run_view, name="delete_eval_run"),
    path("runs/<str:run_id>/cancel/", eval_runs.cancel_eval_run, name="cancel_eval_run"),
    path("runs/<str:run_id>/rules/", rules.eval_run_rules, name="eval_run_rules"),
    path("runs/<str:run_id>/ledger/", ledger.eval_run_ledger, name="eval_run_ledger"),
    path("runs/<str:run_id>/distributions/", figures.eval_run_distributions, name="eval_run_distributions"),
    path("runs/<str:run_id>/review/", reviews.review_queue, name="review_queue"),
    path("runs/<str:run_id>/review/<int:result_id>/", reviews.save_review_view, name="save_review"),
    path("runs/<str:run_id>/review/assign/", reviews.assign_queue, name="assign_reviews"),
    path("runs/<str:run_id>/reviews/agreement/", reviews.review_agreement, name="review_agreement"),
    path("runs/<str:run_id>/cases/<int:result_id>/", eval_runs.result_detail, name="result"),
    path("runs/<str:run_id>/cases/<int:result_id>/rerun/", eval_runs.rerun_case, name="rerun_case"),
    path("compare/", compare.compare, name="compare"),
    path("compare/scorers/", compare.compare_scorers, name="compare_scorers"),
    path("compare/slices/", compare.compare_slices_view, name="compare_slices"),
    path("compare/case/", compare.compare_case, name="compare_case"),
    path("compare/cases/", compare.compare_many_cases, name="compare_many_cases"),
    path("compare/many/scorers/", compare.compare_many_scorers, name="compare_many_scorers"),
    path("compare/many/slices/", compare.compare_many_slices, name="compare_many_slices"),
    path("compare/many/pareto/", compare.compare_many_pareto, name="compare_many_pareto"),
    path("compare/turns/", compare.compare_turns, name="compare_turns"),
    path("compare/rules/", rules.compare_rule_flips, name="compare_rules"),
    path("compare/judges/", ledger.compare_judges, name="compare_judges"),
    path("sets/", sets.set_list, name="sets"),
    path("sets/<int:set_id>/", sets.set_detail, name="set"),
    path("sets/<int:set_id>/splits/", sets.set_splits, name="splits"),
    path("sets/<int:set_id>/cases/<path:case_id>/history/", sets.case_history_view, name="case_history"),
    path("sets/<int:set_id>/versions/", sets.set_version_diff, name="set_versions"),
    path("sets/<int:set_id>/reviews/", reviews.set_review_agreement, name="set_reviews"),
    path("sets/<int:set_id>/leaderboard/", sets.set_leaderboard, name="set_leaderboard"),
    path("sets/<int:set_id>/flakiness/", ledger.set_flakiness, name="set_flakiness"),
    path("sets/<int:set_id>/review/", set_reviews.set_review_queue, name="set_review_queue"),
    path("sets/<int:set_id>/review/<int:result_id>/", set_reviews.save_set_review, name="save_set_review"),
    path("sets/<int:set_id>/review/assign/", set_reviews.assign_set_queue, name="assign_set_reviews"),
    path("trends/", sets.trends, name="trends"),
    path("status/", status.status, name="status"),
]
