"""Pages of the playground."""

from __future__ import annotations

from django.urls import path

from apps.agents import views

app_name = "agents"

urlpatterns = [
    path("", views.playground, name="playground"),
    path("new/", views.new_session, name="new_session"),
    path("<int:session_id>/", views.session_detail, name="session"),
    path("<int:session_id>/send/", views.send_message, name="send"),
]
