"""Pages of the evals app (mounted at the site root)."""

from __future__ import annotations

from django.urls import path

from apps.evals import views

app_name = "evals"

urlpatterns = [
    path("", views.home, name="home"),
    path("runs/", views.run_list, name="runs"),
    path("runs/new/", views.start_run, name="start_run"),
    path("runs/new/check/", views.start_run_check, name="start_run_check"),
    path("runs/<str:run_id>/", views.run_detail, name="run"),
    path("runs/<str:run_id>/resume/", views.resume_run, name="resume_run"),
    path("runs/<str:run_id>/cases/<int:result_id>/", views.result_detail, name="result"),
    path("runs/<str:run_id>/cases/<int:result_id>/rerun/", views.rerun_case, name="rerun_case"),
    path("compare/", views.compare, name="compare"),
    path("compare/scorers/", views.compare_scorers, name="compare_scorers"),
    path("compare/case/", views.compare_case, name="compare_case"),
    path("sets/", views.set_list, name="sets"),
    path("sets/<int:set_id>/", views.set_detail, name="set"),
    path("sets/<int:set_id>/splits/", views.set_splits, name="splits"),
    path("trends/", views.trends, name="trends"),
]
