"""Websocket routes (live progress)."""

from __future__ import annotations

from channels.generic.websocket import AsyncWebsocketConsumer
from django.urls import URLPattern, path, re_path

from apps.evals.views.live import EvalRunConsumer

CLOSE_NO_ROUTE = 4404


class NoRouteConsumer(AsyncWebsocketConsumer):  # type: ignore[misc]  # channels has no type hints
    """Any other websocket path: accepted, then closed with 4404 (Channels' router would raise,
    and the server would answer HTTP 500 with a traceback in its log)."""

    async def connect(self) -> None:
        await self.accept()
        await self.close(code=CLOSE_NO_ROUTE)


websocket_urlpatterns: list[URLPattern] = [
    path("ws/eval/runs/<str:run_id>/", EvalRunConsumer.as_asgi()),
    re_path(r"", NoRouteConsumer.as_asgi()),
]
