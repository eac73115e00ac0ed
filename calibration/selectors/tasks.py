"""Tasks with their calibration: the task list, the review queue and the environment overview."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db import connection
from django.db.models import (
    Case,
    Count,
    Exists,
    F,
    FilteredRelation,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    TextField,
    Value,
    When,
)
from django.db.models.functions import Cast

from calibration.models import (
    Band,
    Calibration,
    Campaign,
    Diagnosis,
    ProbeModel,
)
from calibration.selectors.impossible_variants import FOUND_HACK, found_hack_q
from curation.models import Environment, Task, TaskStatus
from curation.policy import tasks_visible_to
from curation.selectors import GAMEABLE, gameable_q
from engine import stats
from review import assignments, double_review

SORTS = {
    "key": "key_order",  # natural order: /2 before /10
    "-key": "-key_order",
    "pass_rate": F("pass_rate").asc(nulls_last=True),
    "-pass_rate": F("pass_rate").desc(nulls_last=True),
    "attempts": "attempts",
    "-attempts": "-attempts",
    "updated": "updated_at",
    "-updated": "-updated_at",
}


def calibrations_flagged(flag: str) -> QuerySet[Calibration]:
    """Calibrations whose flags include `flag`, on PostgreSQL and the embedded SQLite alike.

    JSON containment (`flags__contains`, jsonb's @>) does not exist on SQLite, where the flags list's JSON
    text holds the quoted name; on PostgreSQL containment skips turning every row's flags into text.
    """
    if connection.vendor == "postgresql":
        return Calibration.objects.filter(flags__contains=[flag])
    return Calibration.objects.annotate(flags_text=Cast("flags", TextField())).filter(flags_text__contains=f'"{flag}"')


def default_probe_model(environment: Environment | None = None) -> ProbeModel | None:
    """The model whose calibration a page shows when none is chosen: the one used most recently."""
    campaigns = environment.campaigns if environment else None
    latest = campaigns.select_related("probe_model").first() if campaigns is not None else None
    if latest:
        return latest.probe_model
    return ProbeModel.objects.order_by("-created_at").first()


# The calibration's columns each task of tasks_with_calibration carries, under the same names.
CALIBRATION_COLUMNS = (
    "pass_rate",
    "interval_low",
    "interval_high",
    "band",
    "attempts",
    "successes",
    "verifier_errors",
    "grpo_signal",
    "cost_usd",
    "flags",
    "diagnosis",
    "predicted_probability",
)


def tasks_with_calibration(
    *,
    user: AbstractBaseUser,
    environment: Environment | None = None,
    probe_model: ProbeModel | None = None,
    band: str = "",
    status: str = "",
    search: str = "",
    sort: str = "key",
    owner: AbstractBaseUser | None = None,
    flag: str = "",
    diagnosis: str = "",
) -> QuerySet[Task]:
    """Tasks annotated with the current version's calibration under one probe model.

    `flag` is a calibration flag (verifier_trouble, zero_variance), audit_failed or gameable; `diagnosis` a too_hard
    diagnosis (suspect_verifier, truncated, hard), which only too_hard calibrations have.
    """
    tasks = tasks_visible_to(user).select_related("environment", "current_version", "owner")
    if owner is not None:
        tasks = tasks.filter(owner=owner)
    if flag == "audit_failed":
        tasks = tasks.filter(current_version__audit_passed=False)
    if environment is not None:
        tasks = tasks.filter(environment=environment)
    if status:
        tasks = tasks.filter(status=status)
    if search:
        tasks = tasks.filter(Q(key__icontains=search) | Q(current_version__prompt__icontains=search))
    calibrations = Calibration.objects.filter(task_version=OuterRef("current_version"))
    if probe_model is not None:
        # At most one calibration per version and model: one LEFT JOIN instead of a subquery per column.
        tasks = tasks.annotate(
            calibration_under_model=FilteredRelation(
                "current_version__calibrations", condition=Q(current_version__calibrations__probe_model=probe_model)
            )
        ).annotate(**{field: F(f"calibration_under_model__{field}") for field in CALIBRATION_COLUMNS})
        calibrations = calibrations.filter(probe_model=probe_model)
    else:
        # The latest calibration under any model.
        calibrations = calibrations.order_by("-updated_at")
        for field in CALIBRATION_COLUMNS:
            tasks = tasks.annotate(**{field: Subquery(calibrations.values(field)[:1])})
    if band:
        tasks = tasks.filter(band=band)
    if diagnosis:
        tasks = tasks.filter(diagnosis=diagnosis)
    if flag == GAMEABLE:
        tasks = tasks.filter(gameable_q())
    elif flag and flag != "audit_failed":
        flagged = calibrations_flagged(flag).filter(task_version=OuterRef("current_version"))
        if probe_model is not None:
            flagged = flagged.filter(probe_model=probe_model)
        tasks = tasks.filter(Exists(flagged))
    return tasks.order_by(SORTS.get(sort, "key_order"), "pk")


def environments_overview(*, user: AbstractBaseUser) -> list[dict]:
    """Each environment with its task count, tasks per band (current versions, any model) and its
    running or paused campaigns (`probing`: a list of campaigns, latest first)."""
    environments = Environment.objects.annotate(task_count=Count("tasks", distinct=True))
    band_rows = (
        Calibration.objects.filter(task_version__task__current_version=F("task_version"))
        .values("task_version__task__environment", "band")
        .annotate(count=Count("task_version", distinct=True))
    )
    bands: dict[int, dict[str, int]] = {}
    for row in band_rows:
        bands.setdefault(row["task_version__task__environment"], {})[row["band"]] = row["count"]
    probing: dict[int, list[Campaign]] = {}
    for campaign in Campaign.objects.filter(
        status__in=[Campaign.Status.RUNNING, Campaign.Status.PAUSED]
    ).select_related("probe_model"):
        probing.setdefault(campaign.environment_id, []).append(campaign)
    return [
        {"environment": environment, "bands": bands.get(environment.pk, {}), "probing": probing.get(environment.pk, [])}
        for environment in environments
    ]


def too_hard_by_diagnosis(
    *, user: AbstractBaseUser, environment: Environment | None, probe_model: ProbeModel | None
) -> list[dict]:
    """The too_hard tasks `user` may see, counted by diagnosis (current versions, under `probe_model`,
    in `environment`; None: all), every diagnosis listed: [{"diagnosis", "label", "count"}]."""
    calibrations = Calibration.objects.filter(
        band=Band.TOO_HARD,
        task_version__task__current_version=F("task_version"),
        task_version__task__in=tasks_visible_to(user).values("pk"),
    )
    if environment is not None:
        calibrations = calibrations.filter(task_version__task__environment=environment)
    if probe_model is not None:
        calibrations = calibrations.filter(probe_model=probe_model)
    counts = dict(calibrations.values("diagnosis").annotate(count=Count("id")).values_list("diagnosis", "count"))
    rows = [{"diagnosis": value, "label": label, "count": counts.get(value, 0)} for value, label in Diagnosis.choices]
    if counts.get(""):
        rows.append({"diagnosis": "", "label": "not diagnosed yet", "count": counts[""]})
    return rows


# Lower sorts first: what most needs a human look comes first.
PRIORITIES = [
    (stats.Flag.VERIFIER_TROUBLE.value, "verifier trouble"),
    ("audit_failed", "audit failed"),
    ("too_easy", "too easy"),
    ("too_hard", "too hard"),
    ("normal", "no flag"),
]


FLAGS = [name for name, _ in PRIORITIES if name != "normal"]


def _current_calibrations(**filters) -> QuerySet[Calibration]:
    return Calibration.objects.filter(task_version=OuterRef("current_version"), **filters)


def review_queue(
    *,
    user: AbstractBaseUser,
    environment: Environment | None = None,
    band: str = "",
    flag: str = "",
    search: str = "",
) -> QuerySet[Task]:
    """Submitted and in-review tasks, flagged first (verifier trouble, audit failures, too easy, too hard).

    Each task carries its latest calibration's fields (see tasks_with_calibration) and a
    `priority` from 0 (verifier trouble) to 4 (no flag). Ties go to the task waiting longest.
    Tasks another reviewer holds by a live claim are left out and the user's own claims come first
    (review.assignments); so are tasks waiting for a second, blind review (review.double_review).
    """
    tasks = tasks_with_calibration(user=user, environment=environment, band=band, search=search)
    tasks = tasks.filter(status__in=[TaskStatus.SUBMITTED, TaskStatus.IN_REVIEW]).annotate(
        has_verifier_trouble=Exists(
            calibrations_flagged(stats.Flag.VERIFIER_TROUBLE).filter(task_version=OuterRef("current_version"))
        ),
        is_too_easy=Exists(_current_calibrations(band=Band.RETIRE)),
        is_too_hard=Exists(_current_calibrations(band=Band.TOO_HARD)),
        # A pass on an impossible variant is verifier trouble found by the policy itself.
        has_found_hack=found_hack_q(),
    )
    tasks = tasks.annotate(
        priority=Case(
            When(Q(has_verifier_trouble=True) | Q(has_found_hack=True), then=Value(0)),
            When(current_version__audit_passed=False, then=Value(1)),
            When(is_too_easy=True, then=Value(2)),
            When(is_too_hard=True, then=Value(3)),
            default=Value(4),
            output_field=IntegerField(),
        )
    )
    if flag == GAMEABLE:
        tasks = tasks.filter(gameable_q())
    elif flag == FOUND_HACK:
        tasks = tasks.filter(has_found_hack=True)
    elif flag:
        index = [name for name, _ in PRIORITIES].index(flag) if flag in FLAGS else None
        tasks = tasks.filter(priority=index) if index is not None else tasks.none()
    tasks = double_review.queue_without_pending(assignments.queue_without_others_claims(tasks, reviewer=user))
    return tasks.order_by("-claimed_by_me", "priority", "updated_at", "pk")
