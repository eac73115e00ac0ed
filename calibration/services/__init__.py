"""Writes for calibration, one module per subject; import from here: `from calibration import services`.

- probe_models: register a model, its backend and sampling parameters, the price of a rollout
- campaigns: start, queue, reconcile, pause, resume, cancel
- leases: a worker's lease on the round it works on, renewed by a heartbeat; what counts as stalled
- rounds: the round pipeline (round_generate, round_score, round_run) and the inline runner
- policies: an environment's thresholds, a campaign's stored sampling policy and its stopping rule
- learning: an environment's population prior and the stopping tables learned from its own probes
- calibrations: refreshing stored calibrations from their rollouts, re-banding on new thresholds
- side_information: each task's score before it is probed (declared difficulty, other probe models)
  and the learned tables per stratum of it
- diagnosis: why a too_hard task is too hard (suspect_verifier, truncated, hard), stored with its band
- feedback: trainer reports, drift, automatic retirement, re-probing
- ladder: a cheap model's pass rates as the prior for a stronger one
- checkpoints: re-profile tasks for a new checkpoint of a run (predict the sure bands, probe the rest)
- judge_samples: judged rollouts drawn for blind review (people checking LLM judges)
- impossible_variants: probes of tasks no honest answer can pass; a pass on one is a found hack
- variant_leases: a probe job's lease, and beat queuing again a probe whose job was lost
"""

from calibration.services.calibrations import (
    calibration_refresh,
    calibrations_refresh,
    environment_calibrations_refresh,
    environment_thresholds_set,
)
from calibration.services.campaigns import (
    campaign_enqueue_pending,
    campaign_finish_if_done,
    campaign_is_running,
    campaign_set_status,
    campaign_start,
    campaigns_reconcile,
    round_enqueue,
    tasks_per_job,
)
from calibration.services.checkpoints import (
    checkpoint_reprofile,
    checkpoint_reprofile_continue,
    reprofile_mark_failed,
    run_checkpoints,
)
from calibration.services.diagnosis import too_hard_diagnose
from calibration.services.episodes import is_tool_task
from calibration.services.feedback import (
    FEEDBACK_RETIRE_REASON,
    FEEDBACK_REVIVE_REASON,
    Drift,
    FeedbackOutcome,
    feedback_drift,
    feedback_record,
    reprobe_sample,
)
from calibration.services.health import episode_health_prune, episode_health_record
from calibration.services.impossible_variants import (
    found_hacks_flag,
    variant_probe_run,
    variant_probe_start,
)
from calibration.services.judge_samples import judge_sample_rank, judge_samples_draw
from calibration.services.ladder import (
    campaign_start_ladder,
    ladder_fit,
)
from calibration.services.learning import (
    PRIOR_CACHE_SECONDS,
    environment_learned_table,
    environment_learning,
    environment_prior,
)
from calibration.services.leases import round_lease_release, round_lease_renew, round_leased
from calibration.services.policies import EVIDENCE, policy_for, thresholds_for
from calibration.services.probe_models import (
    backend_for_probe_model,
    probe_model_add,
    probe_model_update,
    sampling_params,
)
from calibration.services.retention import rollouts_prune
from calibration.services.rounds import (
    campaign_items_advance,
    campaign_run_inline,
    rollouts_generate,
    rollouts_verify,
    round_generate,
    round_indices,
    round_run,
    round_score,
    round_score_and_continue,
)
from calibration.services.variant_leases import variant_probe_leased, variant_probes_reconcile

__all__ = [
    "found_hacks_flag",
    "variant_probe_run",
    "variant_probe_start",
    "variant_probe_leased",
    "variant_probes_reconcile",
    "Drift",
    "EVIDENCE",
    "FEEDBACK_RETIRE_REASON",
    "FEEDBACK_REVIVE_REASON",
    "episode_health_prune",
    "episode_health_record",
    "FeedbackOutcome",
    "PRIOR_CACHE_SECONDS",
    "backend_for_probe_model",
    "calibration_refresh",
    "calibrations_refresh",
    "campaign_enqueue_pending",
    "campaign_finish_if_done",
    "campaign_is_running",
    "campaign_items_advance",
    "campaign_run_inline",
    "campaign_set_status",
    "campaign_start",
    "campaign_start_ladder",
    "checkpoint_reprofile",
    "checkpoint_reprofile_continue",
    "campaigns_reconcile",
    "round_lease_release",
    "round_lease_renew",
    "round_leased",
    "environment_calibrations_refresh",
    "environment_learned_table",
    "environment_learning",
    "environment_prior",
    "environment_thresholds_set",
    "feedback_drift",
    "feedback_record",
    "is_tool_task",
    "judge_sample_rank",
    "judge_samples_draw",
    "ladder_fit",
    "policy_for",
    "probe_model_add",
    "probe_model_update",
    "reprobe_sample",
    "rollouts_generate",
    "rollouts_prune",
    "rollouts_verify",
    "round_enqueue",
    "round_generate",
    "round_indices",
    "round_run",
    "round_score",
    "round_score_and_continue",
    "reprofile_mark_failed",
    "run_checkpoints",
    "sampling_params",
    "tasks_per_job",
    "thresholds_for",
    "too_hard_diagnose",
]
