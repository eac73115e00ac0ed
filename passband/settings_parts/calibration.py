"""Calibration's settings (docs/calibration.md): default band thresholds, the priors and learned tables,
campaign jobs and retries, near-duplicates, trainer feedback, judge samples, the weak-test check and probe
estimates."""

import os

from django.core.exceptions import ImproperlyConfigured

from passband.settings_parts.env import env_float

# Default thresholds for new environments; each environment keeps its own.
PASSBAND_FLOOR = env_float("PASSBAND_FLOOR", 0.02)
PASSBAND_RETIRE = env_float("PASSBAND_RETIRE", 0.70)
if not 0 < PASSBAND_FLOOR < PASSBAND_RETIRE < 1:
    raise ImproperlyConfigured("Need 0 < PASSBAND_FLOOR < PASSBAND_RETIRE < 1.")

# Calibration (see docs/calibration.md).
# A task whose verifier errors or times out on more than this share of verdicts is flagged, not called hard.
PASSBAND_VERIFIER_TROUBLE_SHARE = env_float("PASSBAND_VERIFIER_TROUBLE_SHARE", 0.2)
# Calibrated tasks (per environment and probe model) needed before an empirical-Bayes prior replaces
# Jeffreys; 0 keeps Jeffreys always.
PASSBAND_PRIOR_MIN_TASKS = int(os.environ.get("PASSBAND_PRIOR_MIN_TASKS", "30"))
# Tasks with evidence (per environment and probe model) needed before the adaptive policy probes
# with a stopping table learned from the environment's own population (docs/prediction.md);
# 0 keeps the calibrated rule always.
PASSBAND_LEARNED_MIN_TASKS = int(os.environ.get("PASSBAND_LEARNED_MIN_TASKS", "1000"))
# Let that learned policy be a mixture of two tables, a share of tasks (fixed by id) on each
# (stats.learned_table(mixture=True)); off: on a 1,000-task fit it can break a slice limit
# (docs/benchmarks-calibration.md, "Learned tables").
PASSBAND_LEARNED_MIXTURE = os.environ.get("PASSBAND_LEARNED_MIXTURE", "0") == "1"
# Campaign and task pages warn when more than this share of generated rollouts hit the completion
# budget (finish reason "length"): they were graded as they stood, so raise max new tokens.
PASSBAND_TRUNCATION_WARN_SHARE = env_float("PASSBAND_TRUNCATION_WARN_SHARE", 0.10)

# Near-duplicates and contamination (similarity/, engine/similarity.py; see docs/similarity.md). A task
# is a near-duplicate when another task with the same numbers has MinHash Jaccard >= the first or
# embedding cosine >= the second; contaminated when >= the overlap share of its word 13-grams is in
# one benchmark item, or its embedding is that close to one.
PASSBAND_DUPLICATE_JACCARD = env_float("PASSBAND_DUPLICATE_JACCARD", 0.6)
PASSBAND_DUPLICATE_COSINE = env_float("PASSBAND_DUPLICATE_COSINE", 0.85)
PASSBAND_CONTAMINATION_OVERLAP = env_float("PASSBAND_CONTAMINATION_OVERLAP", 0.2)
PASSBAND_CONTAMINATION_COSINE = env_float("PASSBAND_CONTAMINATION_COSINE", 0.92)
# Trainer feedback: evidence k checkpoints older than the latest counts discount**k.
PASSBAND_FEEDBACK_DISCOUNT = env_float("PASSBAND_FEEDBACK_DISCOUNT", 0.5)
# Feedback retires a task when P(pass rate in the retire band) reaches this.
PASSBAND_FEEDBACK_CONFIDENCE = env_float("PASSBAND_FEEDBACK_CONFIDENCE", 0.95)
# Beat: the chance that each too-hard or retired task is re-probed in one daily run, and that run's cap.
PASSBAND_REPROBE_PROBABILITY = env_float("PASSBAND_REPROBE_PROBABILITY", 0.02)
PASSBAND_REPROBE_CAP = int(os.environ.get("PASSBAND_REPROBE_CAP", "64"))
# Samples the model server failed to give (down, refusing, timing out) are asked for again after a
# pause that doubles up to this many seconds, for as long as the campaign runs.
PASSBAND_SERVER_RETRY_MAX_S = env_float("PASSBAND_SERVER_RETRY_MAX_S", 60.0)
# The inline runner (manage.py calibrate): how long a round waits for a server that fails before the
# command stops, leaving the campaign running for a later run or the workers to finish.
PASSBAND_INLINE_SERVER_WAIT_S = env_float("PASSBAND_INLINE_SERVER_WAIT_S", 300.0)
# Task versions per generate/verify job when a server samples and the verifier is cheap: the broker
# messages and queries of a job are shared by all of them (see calibration.services.tasks_per_job).
PASSBAND_TASKS_PER_JOB = int(os.environ.get("PASSBAND_TASKS_PER_JOB", "32"))
# Jobs each running campaign keeps queued; each finished job queues the next. A window, not the whole
# campaign, sits in the broker: a cancelled campaign leaves at most this many jobs to discard, and two
# campaigns share the workers instead of one waiting behind the other. Keep it above the number of
# generate worker processes.
PASSBAND_JOBS_PER_CAMPAIGN = int(os.environ.get("PASSBAND_JOBS_PER_CAMPAIGN", "16"))


# Judges checked against people (docs/verifiers.md): every PASSBAND_JUDGE_SAMPLE_EVERY seconds, a
# deterministic PASSBAND_JUDGE_SAMPLE_SHARE of judged rollouts (ranked by sha256 of the seed, judge,
# prompt version and rollout id), at most PASSBAND_JUDGE_SAMPLE_LIMIT per judge and prompt version,
# goes to reviewers blind. A judge's page warns when its false-pass rate is above the limit.
PASSBAND_JUDGE_SAMPLE_SHARE = env_float("PASSBAND_JUDGE_SAMPLE_SHARE", 0.05)
PASSBAND_JUDGE_SAMPLE_LIMIT = int(os.environ.get("PASSBAND_JUDGE_SAMPLE_LIMIT", "200"))
PASSBAND_JUDGE_SAMPLE_SEED = int(os.environ.get("PASSBAND_JUDGE_SAMPLE_SEED", "0"))
PASSBAND_JUDGE_SAMPLE_EVERY = env_float("PASSBAND_JUDGE_SAMPLE_EVERY", 3600.0)
PASSBAND_JUDGE_FALSE_PASS_LIMIT = env_float("PASSBAND_JUDGE_FALSE_PASS_LIMIT", 0.05)
# The weak-test check of code tasks (curation/weak_tests.py, docs/verifiers.md "Weak tests"): at most
# PASSBAND_WEAK_TESTS_MUTANTS mutants of the reference a task at import (0: not at import), flagged when more
# than PASSBAND_WEAK_TESTS_LIMIT of them survive the task's tests.
PASSBAND_WEAK_TESTS_MUTANTS = int(os.environ.get("PASSBAND_WEAK_TESTS_MUTANTS", "20"))
PASSBAND_WEAK_TESTS_LIMIT = env_float("PASSBAND_WEAK_TESTS_LIMIT", 0.5)
if not 0 <= PASSBAND_WEAK_TESTS_MUTANTS <= 200 or not 0 <= PASSBAND_WEAK_TESTS_LIMIT <= 1:
    raise ImproperlyConfigured("Need 0 <= PASSBAND_WEAK_TESTS_MUTANTS <= 200 and 0 <= PASSBAND_WEAK_TESTS_LIMIT <= 1.")

# Generation speed assumed for a probe model with no rollouts yet, to estimate a probe's time and, for
# a model priced by the GPU-hour, its cost (calibration/costs.py). Output tokens per second.
PASSBAND_ESTIMATE_TOKENS_PER_SECOND = float(os.environ.get("PASSBAND_ESTIMATE_TOKENS_PER_SECOND", "50"))
# The longest an in-process model may take to load (read, convert, to its device) before its first
# sample, in the range a first probe's estimate states.
PASSBAND_ESTIMATE_LOAD_SECONDS = float(os.environ.get("PASSBAND_ESTIMATE_LOAD_SECONDS", "600"))

# Where converted model weights are cached (see engine/backends).
PASSBAND_MODEL_CACHE = os.environ.get("PASSBAND_MODEL_CACHE", "")
