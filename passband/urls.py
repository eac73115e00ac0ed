from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from calibration import api as calibration_api
from calibration import dashboard_views
from calibration import views as calibration_views
from curation import api as curation_api
from curation import token_views
from curation import views as curation_views

urlpatterns = [
    path("", curation_views.environment_list, name="environment_list"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("tasks/", curation_views.task_list, name="task_list"),
    path("tasks/upload/", curation_views.task_upload, name="task_upload"),
    path("tasks/<slug:environment_name>/<path:key>/submit/", curation_views.task_submit, name="task_submit"),
    path("tasks/<slug:environment_name>/<path:key>/edit/", curation_views.task_edit, name="task_edit"),
    path("tasks/<slug:environment_name>/<path:key>/probe/", curation_views.task_probe, name="task_probe"),
    path("tasks/<slug:environment_name>/<path:key>/comments/", curation_views.comment_create, name="comment_create"),
    path("comments/<int:comment_id>/resolve/", curation_views.comment_resolve, name="comment_resolve"),
    path("rollouts/", curation_views.trajectory_list, name="trajectory_list"),
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
    path("models/compare/", calibration_views.model_compare, name="model_compare"),
    path("models/compare.json", calibration_views.model_compare_data, name="model_compare_data"),
    path("environments/<slug:environment_name>/costs.json", calibration_views.environment_costs_data, name="environment_costs_data"),
    path("dashboard/pass-rates.json", calibration_views.pass_rate_histogram_data, name="pass_rate_histogram_data"),
    path("dashboard/bands-over-time.json", dashboard_views.bands_over_time_data, name="bands_over_time_data"),
    path("dashboard/cost.json", dashboard_views.cost_data, name="cost_data"),
    path("dashboard/verifier-latency.json", dashboard_views.verifier_latency_data, name="verifier_latency_data"),
    path("dashboard/campaigns.json", dashboard_views.campaigns_progress_data, name="campaigns_progress_data"),
    path("campaigns/<int:campaign_id>/", calibration_views.campaign_detail, name="campaign_detail"),
    path(
        "campaigns/<int:campaign_id>/<str:action>/",
        calibration_views.campaign_control,
        name="campaign_control",
    ),
    path("tokens/", token_views.token_list, name="token_list"),
    path("tokens/<int:token_id>/revoke/", token_views.token_revoke, name="token_revoke"),
    path("api/v1/tasks", curation_api.TaskList.as_view(), name="api_task_list"),
    path("api/v1/calibrations", curation_api.CalibrationList.as_view(), name="api_calibration_list"),
    path("api/v1/rollouts", curation_api.RolloutList.as_view(), name="api_rollout_list"),
    path("api/v1/releases", curation_api.ReleaseCreate.as_view(), name="api_release_create"),
    path("api/v1/releases/<int:release_id>", curation_api.ReleaseDetail.as_view(), name="api_release_detail"),
    path(
        "api/v1/releases/<int:release_id>/files/<str:export_format>.<str:file_type>",
        curation_api.ReleaseFile.as_view(),
        name="api_release_file",
    ),
    path("api/schema/", SpectacularAPIView.as_view(), name="api_schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api_schema"), name="api_docs"),
    path("api/v1/verify", calibration_api.Verify.as_view(), name="api_verify"),
    path("api/v1/feedback", calibration_api.Feedback.as_view(), name="api_feedback"),
    path("admin/", admin.site.urls),
]
