from django.contrib import admin
from django.http import HttpRequest, JsonResponse
from django.urls import include, path, re_path

from evalsite.api import api


def api_not_found(request: HttpRequest, rest: str = "") -> JsonResponse:
    """Unknown API paths answer in the API's JSON error shape, not an HTML page."""
    return JsonResponse({"message": f"no API route {request.path!r}; see /api/docs", "field": None}, status=404)


urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/", api.urls),
    re_path(r"^api/(?P<rest>.*)$", api_not_found),
    path("traces/", include("apps.traces.urls")),
    path("playground/", include("apps.agents.urls")),
    path("", include("apps.evals.urls")),
]
