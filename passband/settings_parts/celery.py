"""Celery's settings: the broker (a filesystem one under var/ when unset, else Redis), acknowledgement and
time limits, the queues, and beat's schedule of reconciling, re-probing and pruning."""

import os

from passband.settings_parts.calibration import PASSBAND_JUDGE_SAMPLE_EVERY
from passband.settings_parts.env import VAR_DIR, env_bool, env_float

# Celery. Unset broker: a filesystem transport under var/, which needs no server: kombu's, made safe for several
# processes (passband/broker.py: messages written whole, and kept in flight until acknowledged).
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "filesystem://")
if CELERY_BROKER_URL in ("filesystem://", "passband-filesystem://"):
    CELERY_BROKER_URL = "passband-filesystem://"
    _broker_dir = VAR_DIR / "broker"
    for _folder in ("queue", "control", "in-flight"):
        (_broker_dir / _folder).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "control_folder": str(_broker_dir / "control"),  # kombu's default is ./control, in the working directory
        "data_folder_in": str(_broker_dir / "queue"),
        "data_folder_out": str(_broker_dir / "queue"),
        "store_processed": False,
        # kombu polls the folder once a second by default, and a worker waits a poll between jobs.
        "polling_interval": 0.1,
    }
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_SERIALIZER = "json"
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
# A killed worker must lose nothing: acknowledge after the work, redeliver if the worker died.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# A cold shutdown (a second signal, or SIGQUIT) gives the job in hand 10 s, then ends it: its message
# is handed out again (acks late), so nothing is lost, and stopping never hangs on a long job.
CELERY_WORKER_SOFT_SHUTDOWN_TIMEOUT = env_float("CELERY_WORKER_SOFT_SHUTDOWN_TIMEOUT", 10.0)
CELERY_WORKER_ENABLE_SOFT_SHUTDOWN_ON_IDLE = True
CELERY_TASK_SOFT_TIME_LIMIT = 600
CELERY_TASK_TIME_LIMIT = 660
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_TASK_ROUTES = {
    "calibration.tasks.generate_*": {"queue": "generate"},
    "calibration.tasks.verify_*": {"queue": "verify"},
    # The sentence model loads once in each process that takes these: keep them off the campaign queues.
    "similarity.tasks.*": {"queue": "similarity"},
}


# Beat: re-queue campaign rounds that stalled. The database, not the broker, knows what is left to do, and the
# workers say what they are at: a worker holds a lease on the round it works on, renewed by a heartbeat thread
# every third of PASSBAND_ROUND_LEASE_S while the job runs, however long a generation takes. Every
# PASSBAND_RECONCILE_EVERY seconds, rounds whose lease ran out (their worker died) are queued again, once each;
# so are rounds queued PASSBAND_STALLED_AFTER seconds ago with no lease, when no lease is live anywhere (no worker
# is at work, so their message was lost). A round waiting behind others, or generating slowly, is never re-queued.
PASSBAND_RECONCILE_EVERY = env_float("PASSBAND_RECONCILE_EVERY", 60.0)
PASSBAND_STALLED_AFTER = env_float("PASSBAND_STALLED_AFTER", 300.0)
PASSBAND_ROUND_LEASE_S = env_float("PASSBAND_ROUND_LEASE_S", 90.0)
CELERY_BEAT_SCHEDULE = {
    "reconcile-campaigns": {"task": "calibration.tasks.reconcile_campaigns", "schedule": PASSBAND_RECONCILE_EVERY},
    # Some too-hard and retired tasks revive: re-probe a small random share of them once a day.
    "reprobe-sample": {"task": "calibration.tasks.reprobe_sample", "schedule": 86400.0},
    "draw-judge-samples": {"task": "calibration.tasks.draw_judge_samples", "schedule": PASSBAND_JUDGE_SAMPLE_EVERY},
    # Environment health is read over the last hour; older minutes are kept a while for a look back, then dropped.
    "prune-episode-health": {"task": "calibration.tasks.prune_episode_health", "schedule": 86400.0},
}
PASSBAND_HEALTH_KEEP_DAYS = env_float("PASSBAND_HEALTH_KEEP_DAYS", 7.0)

# Redis redelivers a message whose worker died without acknowledging it after this many seconds.
# kombu looks for such messages only every interval x throttle seconds (100 s by default) and
# locks the sweep for 300 s: scale both to the timeout so redelivery follows it closely.
if CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    _visibility_timeout = int(os.environ.get("PASSBAND_VISIBILITY_TIMEOUT", "1800"))
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "visibility_timeout": _visibility_timeout,
        "unacked_restore_interval": max(1, min(60, _visibility_timeout // 4)),
        "unacked_restore_throttle": 1,
        "unacked_mutex_expire": max(5, min(300, _visibility_timeout)),
    }
