"""Websocket routes (live progress)."""

websocket_urlpatterns: list = []
