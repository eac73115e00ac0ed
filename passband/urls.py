from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from calibration import api as calibration_api
from calibration import views as calibration_views
from curation import api as curation_api
from curation import views as curation_views

urlpatterns = [
    path("", curation_views.environment_list, name="environment_list"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("tasks/", curation_views.task_list, name="task_list"),
    path("tasks/upload/", curation_views.task_upload, name="task_upload"),
    path("tasks/<slug:environment_name>/<path:key>/submit/", curation_views.task_submit, name="task_submit"),
    path("tasks/<slug:environment_name>/<path:key>/comments/", curation_views.comment_create, name="comment_create"),
    path("comments/<int:comment_id>/resolve/", curation_views.comment_resolve, name="comment_resolve"),
    path("review/", curation_views.review_queue, name="review_queue"),
    path("review/bulk/", curation_views.review_bulk, name="review_bulk"),
    path(
        "review/<slug:environment_name>/<path:key>/<str:action>/",
        curation_views.review_action,
        name="review_action",
    ),
    path("tasks/<slug:environment_name>/<path:key>/", curation_views.task_detail, name="task_detail"),
    path("environments/<slug:environment_name>/probe/", calibration_views.environment_probe, name="environment_probe"),
    path("dashboard/", calibration_views.dashboard, name="dashboard"),
    path("dashboard/pass-rates.json", calibration_views.pass_rate_histogram_data, name="pass_rate_histogram_data"),
    path("campaigns/<int:campaign_id>/", calibration_views.campaign_detail, name="campaign_detail"),
    path(
        "campaigns/<int:campaign_id>/<str:action>/",
        calibration_views.campaign_control,
        name="campaign_control",
    ),
    path("api/v1/tasks", curation_api.TaskList.as_view(), name="api_task_list"),
    path("api/v1/releases", curation_api.ReleaseCreate.as_view(), name="api_release_create"),
    path("api/v1/releases/<int:release_id>", curation_api.ReleaseDetail.as_view(), name="api_release_detail"),
    path(
        "api/v1/releases/<int:release_id>/files/<str:format>.<str:file_type>",
        curation_api.ReleaseFile.as_view(),
        name="api_release_file",
    ),
    path("api/schema/", SpectacularAPIView.as_view(), name="api_schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api_schema"), name="api_docs"),
    path("api/v1/verify", calibration_api.Verify.as_view(), name="api_verify"),
    path("admin/", admin.site.urls),
]
