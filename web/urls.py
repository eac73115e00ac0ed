"""Page routes: every HTML view and the JSON behind its charts."""

from django.contrib.auth import views as auth_views
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

from web.views import bulk as bulk_views
from web.views import campaigns as campaign_views
from web.views import dashboards as dashboard_views
from web.views import dedup as dedup_views
from web.views import environments as environment_views
from web.views import history as history_views
from web.views import imports as import_views
from web.views import impossible_variants as impossible_variant_views
from web.views import judges as judge_views
from web.views import mcp_servers as mcp_server_views
from web.views import ops as ops_views
from web.views import probes as probe_views
from web.views import releases as release_views
from web.views import review as review_views
from web.views import sign_in as sign_in_views
from web.views import tasks as task_views
from web.views import team as team_views
from web.views import tokens as token_views
from web.views import trajectories as trajectory_views

urlpatterns = [
    # For Prometheus and for load balancers and compose health checks.
    path("metrics", ops_views.metrics_view, name="metrics"),
    path("healthz", ops_views.healthz_view, name="healthz"),
    path("favicon.ico", RedirectView.as_view(url=static("web/favicon.svg"), permanent=True), name="favicon"),
    path("", task_views.environment_list, name="environment_list"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("start/", sign_in_views.landing, name="landing"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("oidc/link/", sign_in_views.oidc_link, name="oidc_link"),
    path("oidc/", include("mozilla_django_oidc.urls")),
    path("tasks/", task_views.task_list, name="task_list"),
    path("tasks/bulk/", bulk_views.task_bulk, name="task_bulk"),
    path("tasks/upload/", task_views.task_upload, name="task_upload"),
    path("tasks/upload/<int:job_id>/", task_views.import_job_detail, name="import_job_detail"),
    path("tasks/upload/<int:job_id>/map/", import_views.import_job_map, name="import_job_map"),
    path("tasks/<slug:environment_name>/<path:key>/submit/", task_views.task_submit, name="task_submit"),
    path("tasks/<slug:environment_name>/<path:key>/edit/", task_views.task_edit, name="task_edit"),
    path("tasks/<slug:environment_name>/<path:key>/probe/", task_views.task_probe, name="task_probe"),
    path("tasks/<slug:environment_name>/<path:key>/comments/", review_views.comment_create, name="comment_create"),
    path("comments/<int:comment_id>/resolve/", review_views.comment_resolve, name="comment_resolve"),
    path("rollouts/", trajectory_views.trajectory_list, name="trajectory_list"),
    path("review/", review_views.review_queue, name="review_queue"),
    path("review/bulk/", review_views.review_bulk, name="review_bulk"),
    path("review/duplicates/", dedup_views.dedup_clusters, name="dedup_clusters"),
    path("review/duplicates/keep/", dedup_views.dedup_keep_one, name="dedup_keep_one"),
    path("review/duplicates/dismiss/", dedup_views.dedup_dismiss, name="dedup_dismiss"),
    path("review/duplicates/recheck/", dedup_views.dedup_recheck, name="dedup_recheck"),
    path("review/blind/", judge_views.blind_review_next, name="blind_review_next"),
    path("review/blind/<int:item_id>/", judge_views.blind_review, name="blind_review"),
    path("review/claims/", team_views.review_claims, name="review_claims"),
    path("review/second/", team_views.second_review_next, name="second_review_next"),
    path("review/agreement/", team_views.review_agreement, name="review_agreement"),
    path("review/adjudication/", team_views.adjudication_list, name="adjudication_list"),
    path("review/adjudication/<int:item_id>/", team_views.adjudication_decide, name="adjudication_decide"),
    path("tasks/<slug:environment_name>/<path:key>/gold/", team_views.gold_add, name="gold_add"),
    path("tasks/<slug:environment_name>/<path:key>/fix/", team_views.review_fix, name="review_fix"),
    path("tasks/<slug:environment_name>/<path:key>/reprobe/", team_views.review_reprobe, name="review_reprobe"),
    path("review/defects/", team_views.defect_rates, name="defect_rates"),
    path("notifications/", team_views.notification_list, name="notification_list"),
    path("judges/", judge_views.judge_list, name="judge_list"),
    path("judges/<str:judge>/", judge_views.judge_detail, name="judge_detail"),
    path("judges/<str:judge>/master-keys/", judge_views.judge_master_keys_start, name="judge_master_keys_start"),
    path("judges/<str:judge>/override/", judge_views.judge_scoring_override, name="judge_scoring_override"),
    path(
        "review/<slug:environment_name>/<path:key>/<str:action>/",
        review_views.review_action,
        name="review_action",
    ),
    path("tasks/<slug:environment_name>/<path:key>/", task_views.task_detail, name="task_detail"),
    path("environments/new/", environment_views.environment_create, name="environment_create"),
    path("environments/<slug:environment_name>/", environment_views.environment_detail, name="environment_detail"),
    path("environments/<slug:environment_name>/edit/", environment_views.environment_edit, name="environment_edit"),
    path("environments/<slug:environment_name>/probe/", probe_views.environment_probe, name="environment_probe"),
    path(
        "environments/<slug:environment_name>/impossible-variants/",
        impossible_variant_views.environment_impossible_variants,
        name="environment_impossible_variants",
    ),
    path(
        "environments/<slug:environment_name>/reprofile/",
        probe_views.checkpoint_reprofile,
        name="checkpoint_reprofile",
    ),
    path("mcp-servers/", mcp_server_views.mcp_server_list, name="mcp_server_list"),
    path("mcp-servers/<slug:name>/check/", mcp_server_views.mcp_server_check, name="mcp_server_check"),
    path("mcp-servers/<slug:name>/use/", mcp_server_views.mcp_server_use, name="mcp_server_use"),
    path(
        "mcp-servers/<slug:name>/accept-tools/",
        mcp_server_views.mcp_server_schema_accept,
        name="mcp_server_schema_accept",
    ),
    path("dashboard/", campaign_views.dashboard, name="dashboard"),
    path("models/compare/", campaign_views.model_compare, name="model_compare"),
    path("models/<slug:name>/edit/", campaign_views.probe_model_edit, name="probe_model_edit"),
    path("models/compare.json", campaign_views.model_compare_data, name="model_compare_data"),
    path(
        "environments/<slug:environment_name>/costs.json",
        campaign_views.environment_costs_data,
        name="environment_costs_data",
    ),
    path("dashboard/pass-rates.json", campaign_views.pass_rate_histogram_data, name="pass_rate_histogram_data"),
    path("dashboard/bands-over-time.json", dashboard_views.bands_over_time_data, name="bands_over_time_data"),
    path("dashboard/cost.json", dashboard_views.cost_data, name="cost_data"),
    path("dashboard/verifier-latency.json", dashboard_views.verifier_latency_data, name="verifier_latency_data"),
    path("dashboard/campaigns.json", dashboard_views.campaigns_progress_data, name="campaigns_progress_data"),
    path(
        "dashboard/operating-characteristic.json",
        dashboard_views.operating_characteristic_data,
        name="operating_characteristic_data",
    ),
    path("campaigns/", campaign_views.campaign_list, name="campaign_list"),
    path("campaigns/<int:campaign_id>/", campaign_views.campaign_detail, name="campaign_detail"),
    path("campaigns/<int:campaign_id>/traces.<str:file_type>", campaign_views.campaign_traces, name="campaign_traces"),
    path(
        "campaigns/<int:campaign_id>/<str:action>/",
        campaign_views.campaign_control,
        name="campaign_control",
    ),
    path("releases/", release_views.release_list, name="release_list"),
    path("releases/<int:release_id>/files/<str:file_name>", release_views.release_file, name="release_file"),
    path("releases/<int:release_id>/diff/", history_views.release_diff, name="release_diff"),
    path("history/", history_views.audit_log, name="audit_log"),
    path("tokens/", token_views.token_list, name="token_list"),
    path("tokens/<int:token_id>/revoke/", token_views.token_revoke, name="token_revoke"),
]
