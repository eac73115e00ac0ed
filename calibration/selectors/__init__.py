"""Reads for calibration pages, dashboards and the API, one module per subject."""

from calibration.selectors.campaigns import (
    campaign_band_table,
    campaign_progress,
    feedback_history,
    outcome_counts,
    rollouts_for_viewer,
    task_version_rollouts,
    truncation_by_model,
)
from calibration.selectors.checkpoints import (
    checkpoint_movement,
    model_check_verdict,
    reprofile_in_progress,
    reprofiles_latest,
)
from calibration.selectors.costs import cost_summary, environment_costs, task_cost
from calibration.selectors.curriculum import Curriculum, curriculum_next
from calibration.selectors.dashboards import (
    bands_over_time,
    campaigns_progress,
    campaigns_progress_of,
    curriculum_sweep,
    model_comparison,
    pass_rate_histogram,
    verifier_latency,
)
from calibration.selectors.health import environment_band_counts, environment_health
from calibration.selectors.impossible_variants import (
    FOUND_HACK,
    false_pass_rates,
    found_hack_q,
    version_found_hacks,
)
from calibration.selectors.policies import campaign_policy_in_use, operating_characteristic
from calibration.selectors.probes import SCOPES, probe_estimate, probe_task_versions, probes_running
from calibration.selectors.tasks import (
    FLAGS,
    PRIORITIES,
    SORTS,
    calibrations_flagged,
    default_probe_model,
    environments_overview,
    review_queue,
    tasks_with_calibration,
    too_hard_by_diagnosis,
)

__all__ = [
    "FOUND_HACK",
    "false_pass_rates",
    "found_hack_q",
    "version_found_hacks",
    "FLAGS",
    "PRIORITIES",
    "SCOPES",
    "Curriculum",
    "curriculum_next",
    "SORTS",
    "bands_over_time",
    "campaign_band_table",
    "checkpoint_movement",
    "reprofile_in_progress",
    "reprofiles_latest",
    "model_check_verdict",
    "curriculum_sweep",
    "campaign_policy_in_use",
    "campaign_progress",
    "calibrations_flagged",
    "campaigns_progress",
    "campaigns_progress_of",
    "cost_summary",
    "default_probe_model",
    "environment_band_counts",
    "environment_health",
    "environment_costs",
    "environments_overview",
    "feedback_history",
    "model_comparison",
    "operating_characteristic",
    "outcome_counts",
    "pass_rate_histogram",
    "probe_estimate",
    "probe_task_versions",
    "probes_running",
    "review_queue",
    "rollouts_for_viewer",
    "task_cost",
    "task_version_rollouts",
    "tasks_with_calibration",
    "too_hard_by_diagnosis",
    "truncation_by_model",
    "verifier_latency",
]
