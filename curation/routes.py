"""Every URL's policy, by URL name: its gate (who may use it at all) and the object it acts on.

The permission test walks Django's URL resolver and fails on any route missing here, so a new
route cannot ship without saying who may use it. Views read their gate from this table through
curation.policy (`page`, `api`); the object rules themselves are curation.policy.RULES.
"""

from __future__ import annotations

from dataclasses import dataclass

# Gates: who may use a route at all. A role name (accounts.permissions) means that role or staff.
PUBLIC = "public"  # anyone; the view may check a credential of its own (the metrics token)
SIGNED_IN = "signed_in"  # any signed-in user, trainers included
BROWSER = "browser"  # signed in, not a trainer-only account
AUTHORS, REVIEWERS, LEADS = "authors", "reviewers", "leads"  # leads are reviewers too
CURATORS = "curators"  # authors or reviewers (bulk status changes: submit, or decide)
TRAINERS = "trainers"  # trainers (the API's export scope) and staff: releases in the browser
STAFF = "staff"
API = "api:"  # "api:<scope>": an API token holding that scope (accounts.permissions.SCOPE_ROLES)
ADMIN = "admin"  # Django's admin site: its own staff login


@dataclass(frozen=True)
class Route:
    gate: str
    kind: str | None = None  # the model name of the object in the URL (curation.policy.RULES)
    action: str = "see"  # what the route does to that object
    methods: tuple[str, ...] = ("GET",)


POST = ("POST",)

ROUTES: dict[str, Route] = {
    # Operations and sign-in
    "metrics": Route(PUBLIC),
    "healthz": Route(PUBLIC),
    "favicon": Route(PUBLIC),
    "login": Route(PUBLIC, methods=("GET", "POST")),
    "landing": Route(SIGNED_IN),  # where signing in leads, by role
    "logout": Route(PUBLIC, methods=POST),
    # OpenID Connect (mozilla-django-oidc's views: the provider's answer is their credential)
    "oidc_authentication_init": Route(PUBLIC),
    "oidc_authentication_callback": Route(PUBLIC),
    "oidc_logout": Route(PUBLIC, methods=POST),
    "oidc_link": Route(SIGNED_IN, methods=POST),  # the signed-in person links their own account
    # Tasks
    "environment_list": Route(BROWSER),
    "task_list": Route(BROWSER),
    "task_bulk": Route(CURATORS, methods=POST),
    "task_upload": Route(AUTHORS, methods=("GET", "POST")),
    "import_job_detail": Route(AUTHORS, "importjob"),
    "import_job_map": Route(AUTHORS, "importjob", "change", methods=("GET", "POST")),
    "task_detail": Route(BROWSER, "task"),
    "task_submit": Route(AUTHORS, "task", "change", methods=POST),
    "task_edit": Route(AUTHORS, "task", "change", methods=("GET", "POST")),
    "task_probe": Route(AUTHORS, "task", "probe", methods=POST),
    "comment_create": Route(BROWSER, "task", "discuss", methods=POST),
    "comment_resolve": Route(BROWSER, "comment", "change", methods=POST),
    "trajectory_list": Route(BROWSER),
    # Review
    "review_queue": Route(REVIEWERS),
    "review_bulk": Route(REVIEWERS, methods=POST),
    "review_action": Route(REVIEWERS, "task", "review", methods=POST),
    # The team's workbench (docs/review.md): who holds what, second blind reviews, agreement, adjudication
    "review_claims": Route(LEADS, methods=("GET", "POST")),
    "second_review_next": Route(REVIEWERS),
    "review_agreement": Route(REVIEWERS),
    "adjudication_list": Route(LEADS),
    "adjudication_decide": Route(LEADS, "blinditem", "adjudicate", methods=POST),
    "gold_add": Route(LEADS, "task", "see", methods=POST),
    "review_fix": Route(REVIEWERS, "task", "review", methods=POST),
    "review_reprobe": Route(REVIEWERS, "task", "review", methods=POST),
    "defect_rates": Route(CURATORS),
    "notification_list": Route(SIGNED_IN, methods=("GET", "POST")),
    "dedup_clusters": Route(REVIEWERS),
    "dedup_keep_one": Route(REVIEWERS, methods=POST),
    "dedup_dismiss": Route(REVIEWERS, methods=POST),
    "dedup_recheck": Route(REVIEWERS, methods=POST),
    # Judges checked against people: blind verdicts on judged rollouts, and each judge's agreement
    "blind_review_next": Route(REVIEWERS),
    "blind_review": Route(REVIEWERS, "blinditem", "review", methods=("GET", "POST")),
    "judge_list": Route(BROWSER),
    "judge_detail": Route(BROWSER),
    # The master-key battery on a judge: staff queue a run, or let a judge above the limit score (audited).
    "judge_master_keys_start": Route(STAFF, methods=POST),
    "judge_scoring_override": Route(STAFF, methods=POST),
    # Environments, models, campaigns, dashboards
    "environment_create": Route(REVIEWERS, methods=("GET", "POST")),
    "environment_detail": Route(BROWSER, "environment"),
    "environment_edit": Route(REVIEWERS, "environment", "change", methods=("GET", "POST")),
    "environment_probe": Route(AUTHORS, "environment", "probe", methods=POST),
    # Impossible variants: staff over the environment, a task's owner (or staff) over one task (policy.RULES).
    "environment_impossible_variants": Route(BROWSER, "environment", "probe_variants", methods=POST),
    "checkpoint_reprofile": Route(AUTHORS, "environment", "probe", methods=POST),
    "environment_costs_data": Route(BROWSER, "environment"),
    "dashboard": Route(BROWSER),
    "model_compare": Route(BROWSER),
    "model_compare_data": Route(BROWSER),
    "probe_model_edit": Route(STAFF, "probemodel", "change", methods=POST),
    "mcp_server_list": Route(STAFF, methods=("GET", "POST")),
    "mcp_server_check": Route(STAFF, "mcpserver", "change", methods=POST),
    "mcp_server_use": Route(STAFF, "mcpserver", "change", methods=POST),
    "mcp_server_schema_accept": Route(STAFF, "mcpserver", "change", methods=POST),
    "pass_rate_histogram_data": Route(BROWSER),
    "bands_over_time_data": Route(BROWSER),
    "cost_data": Route(BROWSER),
    "verifier_latency_data": Route(BROWSER),
    "campaigns_progress_data": Route(BROWSER),
    "operating_characteristic_data": Route(BROWSER),
    "campaign_list": Route(BROWSER),
    "campaign_detail": Route(BROWSER, "campaign"),
    "campaign_control": Route(AUTHORS, "campaign", "change", methods=POST),
    "campaign_traces": Route(TRAINERS, "campaign", "export"),
    # API tokens (trainers make theirs here too)
    "token_list": Route(SIGNED_IN, methods=("GET", "POST")),
    "token_revoke": Route(SIGNED_IN, "apitoken", "change", methods=POST),
    # Releases in the browser (what the API's export scope may do)
    "release_list": Route(TRAINERS, methods=("GET", "POST")),
    "release_file": Route(TRAINERS, "release", "export"),
    "release_diff": Route(TRAINERS, "release"),
    "audit_log": Route(STAFF),
    # API v1: the token's scope; objects in the body (a task key) answer 404 when not visible
    "api_task_list": Route(API + "read"),
    "api_task_bulk": Route(API + "curate", methods=POST),
    "api_repo_upload": Route(API + "curate", methods=POST),
    "api_task_comments": Route(API + "read", "task"),
    "api_quality_card": Route(API + "read", "task"),
    "api_comment_create": Route(API + "curate", methods=POST),
    "api_notification_list": Route(API + "read"),
    "api_notification_read": Route(API + "read", methods=POST),
    "api_calibration_list": Route(API + "read"),
    "api_rollout_list": Route(API + "read"),
    "api_release_create": Route(API + "export", methods=("GET", "POST")),
    "api_release_detail": Route(API + "export", "release"),
    "api_release_retry": Route(API + "export", "release", "change", methods=POST),
    "api_release_file": Route(API + "export", "release", "export"),
    "api_release_diff": Route(API + "export", "release"),
    "api_campaign_traces": Route(API + "export", "campaign", "export"),
    "api_campaign_detail": Route(API + "read", "campaign"),
    "api_verify": Route(API + "verify", methods=POST),
    "api_verifier_test": Route(API + "verify", methods=POST),
    "api_feedback": Route(API + "feedback", methods=POST),
    "api_curriculum": Route(API + "read"),
    "api_judge_agreement": Route(API + "read"),
    "api_judge_master_keys": Route(API + "read"),
    "api_environment_impossible_variants": Route(API + "read", "environment"),
    # Checkpoint re-profiles: starting one probes the environment (authors and staff, as the dashboard's button).
    "api_reprofile_list": Route(API + "curate", methods=("GET", "POST")),
    "api_reprofile_detail": Route(API + "curate", "reprofile"),
    # The schema and its docs describe the API and reveal no data (SPECTACULAR_SETTINGS).
    "api_schema": Route(PUBLIC),
    "api_docs": Route(PUBLIC),
}

# URL namespaces whose every route one gate covers.
NAMESPACES: dict[str, Route] = {"admin": Route(ADMIN)}
