"""ASGI entry point: HTTP through Django, websockets through Channels."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
django_asgi_app = get_asgi_application()

# Imported after Django is set up (consumers import models).
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from apps.core.auth import websocket_auth  # noqa: E402
from apps.core.request_limits import limit_request_bodies  # noqa: E402
from evalsite.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        # bodies over a route's limit, and OTLP posts without a valid token, refused as they arrive
        "http": limit_request_bodies(django_asgi_app),
        # a bearer token (CLI, CI) or the browser's session behind the Origin check
        "websocket": websocket_auth(URLRouter(websocket_urlpatterns)),
    }
)
