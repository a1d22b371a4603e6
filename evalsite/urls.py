from django.contrib import admin
from django.urls import include, path

from evalsite.api import api

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/", api.urls),
    path("traces/", include("apps.traces.urls")),
    path("playground/", include("apps.agents.urls")),
    path("", include("apps.evals.urls")),
]
