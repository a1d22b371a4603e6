from typing import Any

from django.conf import settings
from django.contrib import admin
from django.contrib.auth import urls as auth_urls
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.templatetags.static import static
from django.urls import include, path, re_path
from django.views import defaults
from django.views.csrf import csrf_failure as page_csrf_failure
from django.views.decorators.csrf import csrf_exempt
from django.views.generic.base import RedirectView

from apps.agents import urls as agents_urls
from apps.evals.views import capture
from apps.traces import otel_views
from apps.traces import urls as traces_urls
from evalsite.api import api


@csrf_exempt  # it changes nothing: a POST to a missing route is a 404, not a CSRF failure
def api_not_found(request: HttpRequest, rest: str = "") -> JsonResponse:
    """Unknown API paths answer in the API's JSON error shape, not an HTML page, whatever the method."""
    return JsonResponse({"message": f"no API route {request.path!r}; see /api/docs", "field": None}, status=404)


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def _api_error(status: int, message: str) -> JsonResponse:
    return JsonResponse({"message": message, "field": None}, status=status)


# Errors raised before a view answers (a body over DATA_UPLOAD_MAX_MEMORY_SIZE, a bad Host, a
# failed CSRF check, a crash) reach these handlers: the API keeps its JSON shape there too.
def handler400(request: HttpRequest, exception: Exception) -> HttpResponse:
    if not _is_api(request):
        return defaults.bad_request(request, exception)
    if isinstance(exception, RequestDataTooBig):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return _api_error(413, f"request body too large (the limit is {limit} bytes)")
    return _api_error(400, "bad request")


def handler403(request: HttpRequest, exception: Exception) -> HttpResponse:
    if not _is_api(request):
        return defaults.permission_denied(request, exception)
    return _api_error(403, str(exception or "") or "permission denied")


def handler404(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if not _is_api(request):
        return defaults.page_not_found(request, exception)
    return _api_error(404, "not found")


def handler500(request: HttpRequest) -> HttpResponse:
    if not _is_api(request):
        return defaults.server_error(request)
    return _api_error(500, "server error (logged)")


def csrf_failure(request: HttpRequest, reason: str = "", **kwargs: Any) -> HttpResponse:
    """``CSRF_FAILURE_VIEW``: JSON under /api/, Django's page elsewhere."""
    if not _is_api(request):
        return page_csrf_failure(request, reason, **kwargs)
    return _api_error(403, f"CSRF check failed ({reason}): send the X-CSRFToken header or use a bearer token")


# Password reset sends mail: its pages exist only when an e-mail backend is configured. Its
# form is ours: rate-limited, and the same work for known and unknown addresses.
account_urls = [
    p
    for p in auth_urls.urlpatterns
    if settings.PASSWORD_RESET_ENABLED or not (getattr(p, "name", None) or "").startswith("password_reset")
]
if settings.PASSWORD_RESET_ENABLED:
    from apps.core.password_reset import PasswordResetRequestView

    account_urls.insert(0, path("password_reset/", PasswordResetRequestView.as_view(), name="password_reset"))

urlpatterns = [
    # browsers ask for /favicon.ico whatever the page links: send them to the site's icon
    path("favicon.ico", RedirectView.as_view(url=static("evalsite/favicon.svg"), permanent=True)),
    path("admin/", admin.site.urls),
    path("accounts/", include(account_urls)),
    # OTLP/HTTP (a stock exporter's OTEL_EXPORTER_OTLP_ENDPOINT is <site>/api/otlp): before the API's catch-all
    path("api/otlp/v1/traces", otel_views.otlp_traces, name="otlp_traces"),
    path("api/otlp/v1/traces/", otel_views.otlp_traces),
    path("api/", api.urls),
    re_path(r"^api/(?P<rest>.*)$", api_not_found),
    # the trace pages, and the evals page adding an ingested trace as a case (traces never import evals)
    path("traces/", include((traces_urls.urlpatterns + capture.trace_urlpatterns, "traces"))),
    # the playground's pages, and the evals page capturing a conversation as a case (an evals
    # view: the playground app never imports evals) under the same prefix and namespace
    path("playground/", include((agents_urls.urlpatterns + capture.urlpatterns, "agents"))),
    path("online/", include("apps.online.urls")),
    path("", include("apps.evals.urls")),
]
