"""API routes: DRF v1, its schema and its docs (mounted under /api/)."""

from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from api.views import (
    bulk,
    calibrations,
    campaigns,
    comments,
    curriculum,
    feedback,
    impossible_variants,
    judges,
    quality_cards,
    releases,
    repo_uploads,
    reprofiles,
    tasks,
    traces,
    verifier_test,
    verify,
)

urlpatterns = [
    path("v1/tasks", tasks.TaskList.as_view(), name="api_task_list"),
    path("v1/tasks/bulk", bulk.TaskBulk.as_view(), name="api_task_bulk"),
    path("v1/repository-uploads", repo_uploads.RepoUpload.as_view(), name="api_repo_upload"),
    path(
        "v1/tasks/<slug:environment_name>/<path:key>/comments",
        comments.TaskComments.as_view(),
        name="api_task_comments",
    ),
    path(
        "v1/tasks/<slug:environment_name>/<path:key>/versions/<int:number>/quality-card",
        quality_cards.QualityCard.as_view(),
        name="api_quality_card",
    ),
    path("v1/comments", comments.CommentCreate.as_view(), name="api_comment_create"),
    path("v1/notifications", comments.NotificationList.as_view(), name="api_notification_list"),
    path("v1/notifications/read", comments.NotificationRead.as_view(), name="api_notification_read"),
    path("v1/calibrations", calibrations.CalibrationList.as_view(), name="api_calibration_list"),
    path("v1/rollouts", calibrations.RolloutList.as_view(), name="api_rollout_list"),
    path("v1/judges", judges.JudgeAgreement.as_view(), name="api_judge_agreement"),
    path(
        "v1/environments/<slug:environment_name>/impossible-variants",
        impossible_variants.EnvironmentImpossibleVariants.as_view(),
        name="api_environment_impossible_variants",
    ),
    path("v1/judges/master-keys", judges.JudgeMasterKeys.as_view(), name="api_judge_master_keys"),
    path("v1/releases", releases.ReleaseCreate.as_view(), name="api_release_create"),
    path("v1/releases/<int:release_id>", releases.ReleaseDetail.as_view(), name="api_release_detail"),
    path("v1/releases/<int:release_id>/retry", releases.ReleaseRetry.as_view(), name="api_release_retry"),
    path("v1/releases/<int:release_id>/diff", releases.ReleaseDiff.as_view(), name="api_release_diff"),
    path(
        "v1/releases/<int:release_id>/files/<str:export_format>.<str:file_type>",
        releases.ReleaseFile.as_view(),
        name="api_release_file",
    ),
    path("v1/campaigns/<int:campaign_id>", campaigns.CampaignDetail.as_view(), name="api_campaign_detail"),
    path(
        "v1/campaigns/<int:campaign_id>/traces.<str:file_type>",
        traces.CampaignTraces.as_view(),
        name="api_campaign_traces",
    ),
    path("schema/", SpectacularAPIView.as_view(), name="api_schema"),
    path("docs/", SpectacularSwaggerSplitView.as_view(url_name="api_schema"), name="api_docs"),
    path("v1/verify", verify.Verify.as_view(), name="api_verify"),
    path("v1/verifier-test", verifier_test.VerifierTest.as_view(), name="api_verifier_test"),
    path("v1/feedback", feedback.Feedback.as_view(), name="api_feedback"),
    path("v1/curriculum", curriculum.CurriculumNext.as_view(), name="api_curriculum"),
    path("v1/reprofiles", reprofiles.ReprofileList.as_view(), name="api_reprofile_list"),
    path("v1/reprofiles/<int:reprofile_id>", reprofiles.ReprofileDetail.as_view(), name="api_reprofile_detail"),
]
