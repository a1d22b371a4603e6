"""Pages of the traces app."""

from __future__ import annotations

from django.urls import path

from apps.traces import views

app_name = "traces"

urlpatterns = [
    path("", views.trace_list, name="list"),
    path("<int:pk>/", views.trace_detail, name="detail"),
]
