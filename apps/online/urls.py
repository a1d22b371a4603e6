"""Pages of online scoring (mounted at ``/online/``)."""

from __future__ import annotations

from django.urls import path

from apps.online import views

app_name = "online"

urlpatterns = [
    path("", views.rule_list, name="rules"),
    path("rules/<int:pk>/", views.rule_detail, name="rule"),
    path("rules/<int:pk>/alerts/", views.add_alert, name="add_alert"),
    path("rules/<int:pk>/backfill/", views.start_backfill, name="backfill"),
]
