"""Records of what authors write: environments, tasks and their immutable versions."""

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from engine.natural_sort import natural_sort_key
from engine.task_sources import source_kind


def default_floor() -> float:
    """New environments start from the deployment's floor (PASSBAND_FLOOR)."""
    return settings.PASSBAND_FLOOR


def default_retire_at() -> float:
    """New environments start from the deployment's retirement threshold (PASSBAND_RETIRE)."""
    return settings.PASSBAND_RETIRE


def remote_protocol_labels() -> dict[str, str]:
    """Each remote protocol a registered world provider gives worlds on (engine/worlds/registry.py), with what
    pages call a server of it: Passband's MCP and OpenEnv, and any an installed provider adds."""
    from engine.worlds.registry import remote_protocols

    return {name: protocol.label for name, protocol in remote_protocols().items()}


def validate_remote_protocol(value: str) -> None:
    """A server's protocol is one a registered world provider declares (not a fixed list: a package adds one)."""
    known = remote_protocol_labels()
    if value not in known:
        raise ValidationError(
            f"{value!r} is not a remote protocol of this installation; the world providers give: {', '.join(known)}. "
            "Install the package whose world provider declares it.",
            code="unknown_protocol",
        )


def validate_environment_kind(value: str) -> None:
    """An environment's kind: built-in worlds, or the protocol of the remote server its episodes run on."""
    if value != Environment.Kind.BUILTIN:
        validate_remote_protocol(value)


class McpServer(models.Model):
    """A remote environment server registered by staff (curation/mcp_servers.py): an MCP tool server
    or an OpenEnv environment server, or a server of a protocol an installed world provider declares
    (`protocol`, validated against the world-provider registry), where it is and how it is used. Secrets are never
    stored here: `api_key_env` names a variable the operator declared for the server's origin
    (PASSBAND_OUTBOUND_SECRETS) that holds the bearer token, and a stdio server is a command in
    settings (PASSBAND_MCP_STDIO_SERVERS)."""

    class Protocol(models.TextChoices):  # Passband's own; installed world providers may add more
        MCP = "mcp", "MCP server"
        OPENENV = "openenv", "OpenEnv server"

    class CheckStatus(models.TextChoices):
        UNCHECKED = "unchecked", "Not checked"
        PENDING = "pending", "Checking"
        OK = "ok", "Answers"
        FAILED = "failed", "Check failed"

    name = models.SlugField(max_length=80, unique=True)
    protocol = models.CharField(max_length=40, default=Protocol.MCP, validators=[validate_remote_protocol])
    url = models.CharField(
        max_length=500,
        blank=True,
        help_text="MCP: the streamable HTTP endpoint, e.g. http://tools:8000/mcp; OpenEnv: the app's root URL.",
    )
    stdio = models.CharField(
        max_length=80, blank=True, help_text="Or: the name of a stdio server in PASSBAND_MCP_STDIO_SERVERS."
    )
    api_key_env = models.CharField(
        max_length=100,
        blank=True,
        help_text="A variable declared in PASSBAND_OUTBOUND_SECRETS for the server's origin, holding its bearer token.",
    )
    max_sessions = models.PositiveIntegerField(
        default=8, help_text="Rollouts in session with the server at once, over every worker."
    )
    timeout_s = models.FloatField(default=30.0, help_text="Seconds to connect, and per request.")
    reward_tool = models.CharField(
        max_length=64, blank=True, default="grade", help_text="The tool that gives the environment's reward."
    )
    tools = models.JSONField(default=list, blank=True, help_text="The tools the last check listed.")
    checked_at = models.DateTimeField(null=True, blank=True)
    # The last check, run by a worker (never inside a web request): its state and, when it failed, why.
    check_status = models.CharField(max_length=20, choices=CheckStatus.choices, default=CheckStatus.UNCHECKED)
    check_error = models.TextField(blank=True)
    # A session offered tools other than the accepted `tools` (curation/server_schemas.py): what changed,
    # and since when; rollouts wait until staff accept the new schema (then tools_accepted_at is set).
    tools_changed = models.TextField(blank=True)
    tools_changed_at = models.DateTimeField(null=True, blank=True)
    tools_accepted_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+", null=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def protocol_label(self) -> str:
        """What pages call this server ("MCP server"); the protocol's name when no provider declares it here."""
        return remote_protocol_labels().get(self.protocol, f"{self.protocol} server")


class Environment(models.Model):
    """A named collection of tasks with its own verifier default and thresholds. Its `kind` says
    where tool-use episodes happen: a built-in world named by the task, or a remote server (MCP or
    OpenEnv, the kind its server's protocol)."""

    class Kind(models.TextChoices):
        BUILTIN = "builtin", "Built-in worlds"
        MCP = "mcp", "MCP server"
        OPENENV = "openenv", "OpenEnv server"

    name = models.SlugField(max_length=80, unique=True)
    title = models.CharField(max_length=200, blank=True)
    domain = models.CharField(max_length=40, default="math")
    description = models.TextField(blank=True)
    guidelines = models.TextField(blank=True, help_text="What authors should know before writing tasks.")
    verifier_fixtures = models.JSONField(
        default=list, blank=True, help_text="Completions with known verdicts, run against every task's verifier."
    )
    default_verifier = models.JSONField(default=dict, blank=True)
    floor = models.FloatField(default=default_floor, validators=[MinValueValidator(0.0), MaxValueValidator(1.0)])
    retire_at = models.FloatField(
        default=default_retire_at, validators=[MinValueValidator(0.0), MaxValueValidator(1.0)]
    )
    max_new_tokens = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1), MaxValueValidator(32768)],
        help_text="Default completion budget for probes of this environment; blank: the probe model's.",
    )
    # Built-in worlds, or the protocol of its remote server (Kind's MCP and OpenEnv, or an installed one's).
    kind = models.CharField(max_length=40, default=Kind.BUILTIN, validators=[validate_environment_kind])
    mcp_server = models.ForeignKey(
        McpServer, on_delete=models.PROTECT, null=True, blank=True, related_name="environments"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    @property
    def remote_server(self) -> McpServer | None:
        """The server this environment's episodes run on (a kind other than built-in), else None."""
        return self.mcp_server if self.kind != self.Kind.BUILTIN else None

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(floor__gt=0) & models.Q(floor__lt=models.F("retire_at")) & models.Q(retire_at__lt=1),
                name="environment_thresholds_ordered",
            )
        ]

    def __str__(self) -> str:
        return self.name


class TaskStatus(models.TextChoices):
    DRAFT = "draft"
    SUBMITTED = "submitted"
    IN_REVIEW = "in_review"
    CHANGES_REQUESTED = "changes_requested"
    APPROVED = "approved"
    ACTIVE = "active"
    REJECTED = "rejected"
    RETIRED = "retired"


class NaturalSortKeyField(models.CharField):
    """The task key in natural order (engine.natural_sort), filled from `key` whenever a task is saved.

    Set in `pre_save`, which `bulk_create` calls too, so every way of making a task fills it.
    """

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("max_length", 800)  # a 200-character key of single digits grows fourfold
        kwargs.setdefault("editable", False)
        kwargs.setdefault("default", "")
        super().__init__(*args, **kwargs)

    def pre_save(self, model_instance, add):
        value = natural_sort_key(model_instance.key)
        setattr(model_instance, self.attname, value)
        return value


class Task(models.Model):
    """A durable task identity; its content lives in immutable TaskVersion rows."""

    environment = models.ForeignKey(Environment, on_delete=models.PROTECT, related_name="tasks")
    key = models.CharField(max_length=200)
    key_order = NaturalSortKeyField(help_text="The key in natural order: /2 before /10.")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="tasks")
    status = models.CharField(max_length=20, choices=TaskStatus.choices, default=TaskStatus.DRAFT)
    current_version = models.ForeignKey(
        "TaskVersion", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["environment", "key"]
        constraints = [models.UniqueConstraint(fields=["environment", "key"], name="task_key_unique_in_environment")]
        indexes = [
            models.Index(fields=["status"]),
            models.Index(fields=["updated_at"]),
            models.Index(fields=["key_order"], name="task_key_order"),
        ]

    def __str__(self) -> str:
        return f"{self.environment.name}/{self.key}"


class TaskVersion(models.Model):
    """Immutable task content. Rollouts and calibrations point here, never at mutable content."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    prompt = models.JSONField(help_text="Chat messages: a list of {role, content}.")
    answer = models.TextField(blank=True)
    verifier = models.JSONField()
    tools = models.JSONField(default=list, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    domain = models.CharField(max_length=40)
    # Null: the author did not give one (shown as "not given", counted as no dollars in sums).
    authoring_cost_usd = models.DecimalField(max_digits=10, decimal_places=2, null=True, blank=True)
    # The author's declared difficulty (the task format's `difficulty`; higher: harder), or None. Side
    # information: only its order within the environment is used (calibration's tables per stratum).
    declared_difficulty = models.FloatField(null=True, blank=True)
    content_hash = models.CharField(max_length=64, db_index=True)
    audit_passed = models.BooleanField(null=True)
    audit_problems = models.JSONField(default=list, blank=True)
    # The gameability audit (engine/verifiers/gameability.py): None when not run, True when a degenerate
    # completion or an environment fixture broke its expectation; the findings name each completion.
    gameable = models.BooleanField(null=True)
    gameability_findings = models.JSONField(default=list, blank=True)
    gameable_override_reason = models.TextField(blank=True)
    gameable_override_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    gameable_override_at = models.DateTimeField(null=True, blank=True)
    # The weak-test check (curation/weak_tests.py): None when not run, else its result as a dict.
    weak_tests = models.JSONField(null=True, blank=True, default=None)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["task", "number"]
        constraints = [models.UniqueConstraint(fields=["task", "number"], name="task_version_number_unique")]

    def __str__(self) -> str:
        return f"{self.task} v{self.number}"

    def save(self, *args, **kwargs):
        # Immutability is the point of a version: refuse updates of an existing row.
        if self.pk is not None and not kwargs.pop("allow_update", False):
            raise ValueError("TaskVersion rows are immutable; create a new version instead.")
        super().save(*args, **kwargs)


class StatusChange(models.Model):
    """One audited status transition of a task: who, when, from, to and why."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="status_changes")
    from_status = models.CharField(max_length=20, choices=TaskStatus.choices)
    to_status = models.CharField(max_length=20, choices=TaskStatus.choices)
    changed_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True)
    reason = models.TextField(blank=True)
    changed_at = models.DateTimeField(auto_now_add=True)
    # The training step of the trainer feedback that made this change (retired or revived by feedback),
    # so a curriculum draw for an earlier step can be replayed with the pool as it was; null otherwise.
    at_step = models.BigIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["changed_at", "id"]


class Comment(models.Model):
    """A threaded comment on a task; a thread is resolved through its root comment."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="comments")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    body = models.TextField()
    parent = models.ForeignKey("self", on_delete=models.CASCADE, null=True, blank=True, related_name="replies")
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"comment {self.pk} on {self.task}"


class ImportJob(models.Model):
    """A large task file imported in the background: its progress, then its report."""

    class Status(models.TextChoices):
        MAPPING = "mapping"  # stored, waiting for its column mapping to be confirmed
        QUEUED = "queued"
        VALIDATING = "validating"
        WRITING = "writing"
        DONE = "done"
        REJECTED = "rejected"
        FAILED = "failed"

    environment = models.ForeignKey(Environment, on_delete=models.CASCADE, related_name="import_jobs")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="import_jobs")
    filename = models.CharField(max_length=255)
    path = models.CharField(max_length=500, help_text="The uploaded file, removed once the import ends.")
    size_bytes = models.BigIntegerField()
    run_audits = models.BooleanField(default=True)
    snapshots = models.JSONField(
        default=list,
        blank=True,
        help_text="Repository snapshots uploaded with the task file: [[storage name, file name]], removed at the end.",
    )
    mapping = models.JSONField(
        null=True, blank=True, help_text="The column mapping (engine.task_mapping) the rows are read with; null: none."
    )
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    lines_read = models.PositiveIntegerField(default=0)
    bytes_read = models.BigIntegerField(default=0)
    report = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"import {self.pk} of {self.filename} ({self.status})"

    @property
    def unit(self) -> str:
        """What the progress counts: lines of text, or rows of a table (Parquet, Arrow)."""
        return "row" if source_kind(self.filename) in ("parquet", "arrow") else "line"

    @property
    def percent(self) -> int:
        """How far the first pass has read, 0-100; 100 once the import has ended."""
        if self.finished_at is not None:
            return 100
        return min(99, int(100 * self.bytes_read / self.size_bytes)) if self.size_bytes else 0


class ImportMapping(models.Model):
    """A saved column mapping: how the rows of one kind of dataset become tasks of an environment."""

    environment = models.ForeignKey(Environment, on_delete=models.CASCADE, related_name="import_mappings")
    name = models.SlugField(max_length=80)
    config = models.JSONField(help_text="engine.task_mapping.ColumnMapping.as_dict().")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["environment", "name"]
        constraints = [
            models.UniqueConstraint(fields=["environment", "name"], name="import_mapping_name_unique_in_environment")
        ]

    def __str__(self) -> str:
        return f"{self.environment.name}/{self.name}"


class JudgeMasterKeyRun(models.Model):
    """One run of the master-key battery (engine/verifiers/master_keys.py) on a registered judge's tasks: the
    false-pass rate, its one-sided upper bound, each false pass, and a staff override that lets a judge whose
    bound is above the limit score campaigns anyway (curation/judge_master_keys.py)."""

    judge = models.CharField(max_length=80, db_index=True)
    model = models.CharField(max_length=300, blank=True, help_text="The judge's model when the battery ran.")
    tasks = models.PositiveIntegerField(default=0)
    trials = models.PositiveIntegerField(default=0, help_text="Attacks the judge answered with a pass or a fail.")
    false_passes = models.PositiveIntegerField(default=0)
    errors = models.PositiveIntegerField(default=0, help_text="Attacks the judge answered with no verdict.")
    upper_bound = models.FloatField(help_text="One-sided Clopper-Pearson upper bound of the false-pass rate.")
    level = models.FloatField(default=0.95)
    limit = models.FloatField(help_text="PASSBAND_JUDGE_FALSE_PASS_LIMIT when the battery ran.")
    prompt_versions = models.JSONField(default=list, blank=True)
    findings = models.JSONField(default=list, blank=True, help_text="Each false pass: task, attack, completion.")
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    override_reason = models.TextField(blank=True)
    override_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    override_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"master keys of judge {self.judge}: {self.false_passes}/{self.trials}"

    @property
    def rate(self) -> float | None:
        return self.false_passes / self.trials if self.trials else None

    @property
    def above_limit(self) -> bool:
        return self.upper_bound > self.limit
