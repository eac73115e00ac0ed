from django.contrib import admin
from django.urls import include, path

from web.views.ops import healthz_view, metrics_view

urlpatterns = [
    path("metrics", metrics_view, name="metrics"),
    path("healthz", healthz_view, name="healthz"),
    path("api/", include("api.urls")),
    path("admin/", admin.site.urls),
    path("", include("web.urls")),
]
