"""Records of probing: models, campaigns, rollouts and the calibration they add up to."""

from django.conf import settings
from django.db import models

from curation.models import Environment, TaskVersion
from engine import stats
from engine.backends.base import CAPTURES
from engine.backends.openai_servers import SERVER_KINDS, TOOL_MODES
from engine.verifiers import diagnosis as too_hard_diagnosis


class ProbeModel(models.Model):
    """A model that probes tasks, with its sampling parameters and its price."""

    class Backend(models.TextChoices):
        TRANSFORMERS = "transformers"
        OPENAI = "openai"

    name = models.SlugField(max_length=80, unique=True)
    backend = models.CharField(max_length=20, choices=Backend.choices)
    model = models.CharField(max_length=300, blank=True, help_text="Model id, or a directory on disk.")
    revision = models.CharField(max_length=100, blank=True)
    base_url = models.URLField(blank=True)
    api_key_env = models.CharField(max_length=100, blank=True, help_text="Environment variable holding the API key.")
    temperature = models.FloatField(default=0.7)
    top_p = models.FloatField(default=0.95)
    max_new_tokens = models.PositiveIntegerField(default=256)
    stop = models.JSONField(default=list, blank=True)
    samples_per_request = models.PositiveIntegerField(
        default=1,
        help_text="openai backend: consecutive seeds sent as one request with n samples. Above 1 only for "
        "servers that seed choice i with seed + i, as vLLM does.",
    )
    # openai backend: the kind of server (what to ask it for exact capture; engine/backends/openai_servers.py),
    # the endpoint, the per-request timeout, the requests in flight and how tool-use episodes show tools.
    server = models.CharField(
        max_length=40,
        choices=[(kind, kind) for kind in SERVER_KINDS],
        default="vllm",
        help_text="openai backend: vllm, llama.cpp (llama-server) or openai-compatible (SGLang, others).",
    )
    endpoint = models.CharField(
        max_length=20, choices=[("chat", "chat"), ("completions", "completions")], default="chat"
    )
    timeout_s = models.FloatField(default=120.0, help_text="openai backend: seconds per request before a retry.")
    max_concurrency = models.PositiveIntegerField(default=16, help_text="openai backend: requests in flight.")
    tool_mode = models.CharField(
        max_length=20,
        choices=[(mode, mode) for mode in TOOL_MODES],
        blank=True,
        help_text="Tool-use episodes: native (the server renders tools) or text; blank for the server's default.",
    )
    usd_per_gpu_hour = models.DecimalField(max_digits=10, decimal_places=4, default=0)
    gpus = models.PositiveIntegerField(default=1)
    usd_per_million_input_tokens = models.DecimalField(max_digits=10, decimal_places=4, default=0)
    usd_per_million_output_tokens = models.DecimalField(max_digits=10, decimal_places=4, default=0)
    # A strong model that fails an audited task every time suggests the task (not the model) is broken.
    strong = models.BooleanField(
        default=False, help_text="Strong model: 0 passes on a task that passed its audit flags it for review."
    )
    # Checkpoints of one training run are probe models sharing a run, ordered by step: a new one can be
    # re-profiled from the earlier ones (calibration/services/checkpoints.py).
    run = models.SlugField(
        max_length=80, blank=True, help_text="The training run this model is a checkpoint of; blank if none."
    )
    checkpoint_step = models.BigIntegerField(
        null=True, blank=True, help_text="The checkpoint's training step: orders a run's checkpoints."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "checkpoint_step"], condition=~models.Q(run=""), name="probe_model_checkpoint_unique"
            ),
            models.CheckConstraint(
                condition=models.Q(run="") | models.Q(checkpoint_step__isnull=False),
                name="probe_model_checkpoint_has_step",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def has_price(self) -> bool:
        """Whether any price is set (without one, costs read "no price set", never $0)."""
        return bool(self.usd_per_gpu_hour or self.usd_per_million_input_tokens or self.usd_per_million_output_tokens)


class Campaign(models.Model):
    """Probe a set of task versions with one model under one sampling policy."""

    class Status(models.TextChoices):
        RUNNING = "running"
        PAUSED = "paused"
        CANCELLED = "cancelled"
        DONE = "done"

    class Policy(models.TextChoices):
        ADAPTIVE = "adaptive"
        FIXED = "fixed"

    environment = models.ForeignKey(Environment, on_delete=models.PROTECT, related_name="campaigns")
    probe_model = models.ForeignKey(ProbeModel, on_delete=models.PROTECT, related_name="campaigns")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.RUNNING)
    policy = models.CharField(max_length=20, choices=Policy.choices, default=Policy.FIXED)
    seed = models.BigIntegerField()
    round_size = models.PositiveIntegerField(default=8, help_text="Rollouts per task per round.")
    max_rollouts = models.PositiveIntegerField(default=8, help_text="Per task: fixed N, or the adaptive cap.")
    confidence = models.FloatField(default=0.95, help_text="Adaptive: stop when one band is this probable.")
    budget_usd = models.DecimalField(max_digits=12, decimal_places=2, null=True, blank=True)
    # The completion budget of every rollout, fixed at start (the form's, else the environment's
    # default, else the probe model's); null on campaigns from before it was recorded.
    max_new_tokens = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Set while samples wait for the model server (they failed for infrastructure reasons and are
    # asked for again later); cleared when it answers again.
    server_waiting_since = models.DateTimeField(null=True, blank=True)
    server_error = models.TextField(blank=True)
    # Rounds beat queued again because they stalled (a worker died, the broker lost its messages, the
    # database was away): how many task rounds, and the last time.
    stalled_rounds = models.PositiveIntegerField(default=0)
    last_stall_at = models.DateTimeField(null=True, blank=True)
    # Loading the model before its first sample (a download, a conversion, weights to the GPU): when
    # it began and how long it took. A state of its own on the campaign page, never billed to rollouts.
    model_loading_since = models.DateTimeField(null=True, blank=True)
    model_load_seconds = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"campaign {self.pk} ({self.environment.name} × {self.probe_model.name})"


class CampaignItem(models.Model):
    """One task version inside a campaign, and whether its sampling is finished."""

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="items")
    task_version = models.ForeignKey(TaskVersion, on_delete=models.PROTECT, related_name="campaign_items")
    # The round being worked on; moved forward by compare-and-swap so a retried job cannot fork it.
    round = models.PositiveIntegerField(default=0)
    done = models.BooleanField(default=False)
    # When a job for this item was put in the broker; null: not yet (the campaign's window was full).
    queued_at = models.DateTimeField(null=True, blank=True)
    # Beta prior [alpha, beta] for this task, e.g. from a cheaper model (model ladder); null: the default.
    prior = models.JSONField(null=True, blank=True)
    # While a worker holds the round: renewed by its heartbeat (calibration/services/leases.py). A lease that
    # ran out means the worker stopped; null: no worker holds it (queued, or between generate and verify).
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["campaign", "task_version"], name="campaign_item_unique")]
        # Filling the window reads a campaign's open items that are queued, or not yet.
        indexes = [models.Index(fields=["campaign", "done", "queued_at"], name="campaign_item_open")]


class Outcome(models.TextChoices):
    PASS = "pass"
    FAIL = "fail"
    ERROR = "error"
    TIMEOUT = "timeout"
    # The grader caught the answer subverting the tests (engine/repo_tasks): reward 0, never evidence,
    # and the task is flagged.
    TAMPERED = "tampered"
    # The model server failed to generate: not an attempt, never evidence.
    GENERATION_ERROR = "generation_error"
    # The prompt does not fit the model's context: the task's fault, shown to its author; never evidence.
    PROMPT_TOO_LONG = "prompt_too_long"
    # The task's world failed (a plug-in that cannot reset from the task's seed after a bounded retry, a
    # tool past its time limit): the world's outcome, never evidence and never the verifier's error. The
    # detail starts with what failed ("world", "tool", "server").
    WORLD_ERROR = "world_error"
    # Stored but never scored: its campaign was cancelled first. Not evidence and not billed.
    DISCARDED = "discarded"


class Rollout(models.Model):
    """One attempt at a task version, captured exactly as the backend produced it."""

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="rollouts")
    task_version = models.ForeignKey(TaskVersion, on_delete=models.PROTECT, related_name="rollouts")
    probe_model = models.ForeignKey(ProbeModel, on_delete=models.PROTECT, related_name="rollouts")
    sample_index = models.PositiveIntegerField()
    seed = models.BigIntegerField()
    # Packed little-endian arrays (int32 token ids, float32 logprobs); null when the backend gave none.
    prompt_token_ids = models.BinaryField(null=True)
    completion_token_ids = models.BinaryField(null=True)
    logprobs = models.BinaryField(null=True)
    text = models.TextField(blank=True)
    finish_reason = models.CharField(max_length=20, blank=True)
    truncated = models.BooleanField(default=False)
    # What the backend captured (exact: ids and a logprob per id; ids_only; text_only: no ids), which
    # distribution the logprobs describe, and where the prompt ids came from (engine/backends/base.py).
    capture = models.CharField(max_length=20, choices=[(capture, capture) for capture in CAPTURES], blank=True)
    logprob_source = models.CharField(max_length=40, blank=True)
    prompt_ids_source = models.CharField(max_length=40, blank=True)
    sampling = models.JSONField(default=dict)
    generation_error = models.TextField(blank=True)
    input_tokens = models.PositiveIntegerField(null=True)
    output_tokens = models.PositiveIntegerField(null=True)
    generation_ms = models.FloatField(null=True)
    # Its share of the device time of its batch, by the tokens it generated (calibration/costs.py): what
    # a model priced by the GPU-hour charges it. Null on rollouts from before it was recorded.
    device_ms = models.FloatField(null=True)
    outcome = models.CharField(max_length=20, choices=Outcome.choices, null=True, blank=True)
    reward = models.FloatField(null=True)
    detail = models.TextField(blank=True)
    verify_ms = models.FloatField(null=True)
    cost_usd = models.DecimalField(max_digits=14, decimal_places=8, default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    verified_at = models.DateTimeField(null=True)
    # Tool tasks only: the episode transcript (turns, tool calls, observations, final state; see
    # docs/episodes.md). The token fields above then hold the whole episode as one sequence.
    episode = models.JSONField(null=True, blank=True)
    # Set by rollouts_prune (retention): token ids, logprobs, text and episode were dropped; the verdict,
    # reward, token counts and cost stay, so counts and calibrations are unchanged.
    pruned_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["task_version", "sample_index"]
        constraints = [
            models.UniqueConstraint(fields=["campaign", "task_version", "sample_index"], name="rollout_unique_sample")
        ]
        indexes = [
            models.Index(fields=["task_version", "probe_model"]),
            models.Index(fields=["outcome"]),
            # The verifier latency dashboard reads a recent time window from this index alone.
            models.Index(
                fields=["verified_at"],
                include=["verify_ms", "outcome", "probe_model", "campaign"],
                name="rollout_verified_at_cover",
            ),
        ]


# The band column's choices, made from the one definition of the bands in engine.stats.
Band = models.TextChoices(
    "Band",
    [
        (band.name, band.value)
        for band in (stats.UNDECIDED, stats.TOO_HARD, stats.IN_BAND, stats.RETIRE, stats.BORDERLINE)
    ],
)

# Why a too_hard task is too hard (engine/verifiers/diagnosis.py owns the rule).
Diagnosis = models.TextChoices(
    "Diagnosis", [(name.upper(), (name, name.replace("_", " "))) for name in too_hard_diagnosis.DIAGNOSES]
)


class Calibration(models.Model):
    """What the rollouts of one model say about one task version."""

    task_version = models.ForeignKey(TaskVersion, on_delete=models.CASCADE, related_name="calibrations")
    probe_model = models.ForeignKey(ProbeModel, on_delete=models.PROTECT, related_name="calibrations")
    attempts = models.PositiveIntegerField(default=0, help_text="Rollouts with a pass or fail verdict.")
    successes = models.PositiveIntegerField(default=0)
    verifier_errors = models.PositiveIntegerField(default=0, help_text="Verdicts of error or timeout.")
    generation_errors = models.PositiveIntegerField(default=0)
    tampered = models.PositiveIntegerField(default=0, help_text="Verdicts of tampered: never evidence, flags the task.")
    pass_rate = models.FloatField(null=True)
    interval_low = models.FloatField(null=True)
    interval_high = models.FloatField(null=True)
    band = models.CharField(max_length=20, choices=Band.choices, default=Band.UNDECIDED)
    decided = models.BooleanField(default=False)
    grpo_signal = models.FloatField(null=True, help_text="P(a group of G attempts is mixed).")
    cost_usd = models.DecimalField(max_digits=14, decimal_places=6, default=0)
    flags = models.JSONField(default=list, blank=True)
    policy = models.JSONField(default=dict, blank=True, help_text="The sampling policy that produced it.")
    # Set with the band, blank unless the band is too_hard: suspect_verifier, truncated or hard, and what
    # shows it (counts, the rollout ids and excerpts; engine.verifiers.diagnosis.diagnose).
    diagnosis = models.CharField(max_length=20, choices=Diagnosis.choices, blank=True)
    diagnosis_evidence = models.JSONField(default=dict, blank=True)
    # Set when no rollout decided the band: the item-response model predicted it from the run's earlier
    # checkpoints (calibration/services/checkpoints.py), with this probability. Cleared once probed.
    predicted_probability = models.FloatField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["task_version", "probe_model"], name="calibration_unique_per_model")
        ]
        indexes = [
            models.Index(fields=["band"]),
            models.Index(fields=["pass_rate"]),
            models.Index(fields=["diagnosis"]),
        ]


class Reprofile(models.Model):
    """One re-profile of an environment's tasks for a new checkpoint (calibration/services/checkpoints.py).

    Stage "sample": a campaign probes a sample; when it is done the second step starts by itself.
    Stage "reprofile": the sure bands were predicted and the uncertain tasks sent to a campaign (or
    none were). The settings are kept so the second step, run later by a worker, uses the same ones."""

    class Stage(models.TextChoices):
        SAMPLE = "sample"
        REPROFILE = "reprofile"

    environment = models.ForeignKey(Environment, on_delete=models.PROTECT, related_name="reprofiles")
    probe_model = models.ForeignKey(ProbeModel, on_delete=models.PROTECT, related_name="reprofiles")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    stage = models.CharField(max_length=20, choices=Stage.choices, default=Stage.SAMPLE)
    # The tasks in scope: null for the environment's current tasks, else task version ids (a release's).
    task_version_ids = models.JSONField(null=True, blank=True)
    # The release whose pins are task_version_ids, when the re-profile was asked for one (shown on the dashboard).
    # A number, not a foreign key: calibration sits below releases.
    release_id = models.PositiveBigIntegerField(null=True, blank=True)
    sample = models.PositiveIntegerField(default=50)
    level = models.FloatField(default=0.95)
    rollouts = models.PositiveIntegerField(default=72)
    round_size = models.PositiveIntegerField(default=8)
    seed = models.BigIntegerField(null=True, blank=True)
    sample_campaign = models.ForeignKey("Campaign", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    reprofile_campaign = models.ForeignKey(
        "Campaign", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    tasks = models.PositiveIntegerField(default=0)
    predicted = models.PositiveIntegerField(default=0)
    probed = models.PositiveIntegerField(default=0, help_text="Sent to a campaign: the sample's, then the uncertain.")
    ability = models.FloatField(null=True, blank=True)
    ability_sd = models.FloatField(null=True, blank=True)
    # Why the second step, run by a worker, could not be taken (e.g. the tasks are gone); beat does not
    # queue it again, the button or the API shows it, and calling the re-profile again retries it.
    error = models.TextField(blank=True)
    # The sample's test of the item-response model (stats.prediction_check, as_dict): when it is not
    # trusted no band is predicted and every task is probed.
    model_check = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            # At most one re-profile of an environment and checkpoint waits for its sample: a second start
            # finds it rather than sampling again.
            models.UniqueConstraint(
                fields=["environment", "probe_model"],
                condition=models.Q(stage="sample"),
                name="reprofile_one_sampling_per_checkpoint",
            )
        ]

    def __str__(self) -> str:
        return f"re-profile {self.pk} ({self.environment.name} × {self.probe_model.name}, {self.stage})"

    @property
    def campaign(self):
        """The campaign of the current stage (None when the second step had nothing to probe)."""
        return self.sample_campaign if self.stage == self.Stage.SAMPLE else self.reprofile_campaign


class FeedbackReport(models.Model):
    """Pass counts a trainer saw for one task version under one policy checkpoint (POST /api/v1/feedback).

    Reports for the same checkpoint add up; checkpoints are ordered by `checkpoint_step`.
    """

    task_version = models.ForeignKey(TaskVersion, on_delete=models.CASCADE, related_name="feedback_reports")
    reported_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    checkpoint = models.CharField(max_length=200, help_text="The policy checkpoint's name.")
    checkpoint_step = models.BigIntegerField(help_text="Orders checkpoints: training step or a sequence number.")
    attempts = models.PositiveIntegerField()
    passes = models.PositiveIntegerField()
    # A trainer that retries a POST sends the same id; the report is stored once.
    report_id = models.CharField(max_length=100, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["task_version", "checkpoint_step", "id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(passes__lte=models.F("attempts")), name="feedback_passes_le_attempts"
            ),
            models.UniqueConstraint(
                fields=["reported_by", "report_id"], condition=~models.Q(report_id=""), name="feedback_report_id_unique"
            ),
        ]
        indexes = [models.Index(fields=["task_version", "checkpoint_step"])]

    def __str__(self) -> str:
        return f"{self.task_version} @ {self.checkpoint}: {self.passes}/{self.attempts}"


class EpisodeHealth(models.Model):
    """How an environment's worlds behaved, a minute at a time: the episodes attempted on them, those the
    world failed (a reset that crashed or hung, an MCP server unreachable, timed out or gone mid-episode:
    infrastructure outcomes, retried, never counted as evidence), tool calls and tool errors, reset latency.

    Telemetry, not evidence: a retried job's attempts are counted again, because they did reach the world.
    Read by calibration.selectors.health for the environment page; rows older than a day may be pruned."""

    environment = models.ForeignKey(Environment, on_delete=models.CASCADE, related_name="episode_health")
    world = models.CharField(max_length=120, help_text="The plug-in's name, or mcp:<server>.")
    minute = models.DateTimeField(help_text="Start of the minute (UTC) the episodes ended in.")
    episodes = models.PositiveIntegerField(default=0, help_text="Episodes attempted, failed ones included.")
    failures = models.PositiveIntegerField(default=0, help_text="Episodes the world failed (infrastructure).")
    tool_calls = models.PositiveIntegerField(default=0)
    tool_errors = models.PositiveIntegerField(default=0, help_text="Tool calls that crashed or timed out.")
    resets = models.PositiveIntegerField(default=0, help_text="Resets timed (reset_ms_total is their sum).")
    reset_ms_total = models.FloatField(default=0.0)
    reset_ms_max = models.FloatField(default=0.0)
    last_error = models.TextField(blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["environment", "world", "minute"], name="episode_health_unique_minute")
        ]
        indexes = [models.Index(fields=["environment", "minute"])]

    def __str__(self) -> str:
        return f"{self.environment_id}/{self.world} @ {self.minute:%H:%M}: {self.failures}/{self.episodes} failed"


def outcome_count_aggregates() -> dict:
    """Aggregates counting a group of rollouts by outcome: passes, fails, verifier and generation errors."""
    from django.db.models import Count, Q

    return {
        "successes": Count("id", filter=Q(outcome=Outcome.PASS)),
        "failures": Count("id", filter=Q(outcome=Outcome.FAIL)),
        "verifier_errors": Count("id", filter=Q(outcome__in=[Outcome.ERROR, Outcome.TIMEOUT])),
        "tampered": Count("id", filter=Q(outcome=Outcome.TAMPERED)),
        "generation_errors": Count("id", filter=Q(outcome=Outcome.GENERATION_ERROR)),
        "prompts_too_long": Count("id", filter=Q(outcome=Outcome.PROMPT_TOO_LONG)),
        "world_errors": Count("id", filter=Q(outcome=Outcome.WORLD_ERROR)),
    }


# Impossible-variant probes live in tables of their own (never counted as evidence): see the module.
from calibration.variant_models import ImpossibleVariant, VariantProbe, VariantRollout  # noqa: E402, F401
