"""Websocket routes (live progress)."""

from __future__ import annotations

from django.urls import path

from apps.evals.consumers import EvalRunConsumer

websocket_urlpatterns: list = [
    path("ws/eval/runs/<str:run_id>/", EvalRunConsumer.as_asgi()),
]
