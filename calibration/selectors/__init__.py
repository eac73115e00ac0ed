"""Reads for calibration pages, dashboards and the API, one module per subject."""

from calibration.selectors.campaigns import (
    campaign_band_table,
    campaign_progress,
    feedback_history,
    rollouts_for_viewer,
    truncation_by_model,
)
from calibration.selectors.costs import cost_summary, environment_costs, task_cost
from calibration.selectors.dashboards import (
    bands_over_time,
    campaigns_progress,
    model_comparison,
    pass_rate_histogram,
    verifier_latency,
)
from calibration.selectors.probes import SCOPES, probe_estimate, probe_task_versions, probes_running
from calibration.selectors.tasks import (
    FLAGS,
    PRIORITIES,
    SORTS,
    default_probe_model,
    environments_overview,
    review_queue,
    tasks_with_calibration,
)

__all__ = [
    "FLAGS",
    "PRIORITIES",
    "SCOPES",
    "SORTS",
    "bands_over_time",
    "campaign_band_table",
    "campaign_progress",
    "campaigns_progress",
    "cost_summary",
    "default_probe_model",
    "environment_costs",
    "environments_overview",
    "feedback_history",
    "model_comparison",
    "pass_rate_histogram",
    "probe_estimate",
    "probe_task_versions",
    "probes_running",
    "review_queue",
    "rollouts_for_viewer",
    "task_cost",
    "tasks_with_calibration",
    "truncation_by_model",
    "verifier_latency",
]
