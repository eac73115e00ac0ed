"""The task-list filter, defined once: parse query parameters (or a JSON body, or command options)
into a typed TaskFilter, then apply it to tasks or to current versions.

The task list page, the API (GET /api/v1/tasks and bulk), the bulk actions (page, API, the
bulk_status command) and exports and releases all use it, so one filter selects the same tasks
wherever it is given. It lives here, the lowest layer that sees both calibration (bands, flags) and
similarity (contamination, near-duplicates).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Q, QuerySet, TextField
from django.db.models.functions import Cast
from django.utils.dateparse import parse_datetime

from accounts.errors import ServiceError
from calibration import selectors as calibration_selectors
from calibration.models import Band, Diagnosis, ProbeModel
from curation import selectors as curation_selectors
from curation.models import Environment, Task, TaskStatus, TaskVersion
from engine import stats
from similarity import selectors as similarity_selectors
from similarity.models import SimilarityFlag

AUDIT_FAILED = "audit_failed"
FLAGS = (*(flag.value for flag in stats.Flag), AUDIT_FAILED, curation_selectors.GAMEABLE)
# The query parameters a filter reads; everything else in a query string is left to the caller.
PARAMS = (
    "environment",
    "model",
    "band",
    "diagnosis",
    "status",
    "flag",
    "q",
    "mine",
    "domain",
    "pass_rate_min",
    "pass_rate_max",
    "updated_since",
    "contaminated",
    "near_duplicate",
    "sort",
)
TRUE, FALSE = ("1", "true", "on", "yes"), ("", "0", "false", "off", "no")


class TaskFilterError(ServiceError):
    """A filter parameter that is wrong; `field` names it. `missing` when it names nothing that exists."""

    def __init__(self, field: str, message: str, *, missing: bool = False):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.reason = message
        self.missing = missing


@dataclass(frozen=True)
class TaskFilter:
    environment: Environment | None = None
    probe_model: ProbeModel | None = None  # the calibration that band, flag and pass rate refer to
    band: str = ""
    diagnosis: str = ""  # why a too_hard task is too hard (Diagnosis), under the same calibration
    status: str = ""
    flag: str = ""  # a calibration flag (engine.stats.Flag) or audit_failed
    search: str = ""
    mine: bool = False
    domain: str = ""
    pass_rate_min: float | None = None
    pass_rate_max: float | None = None
    updated_since: datetime | None = None
    contaminated: bool | None = None  # True: only flagged tasks; False: none of them
    near_duplicate: bool | None = None
    keys: tuple[str, ...] | None = None
    sort: str = "key"

    def query(self) -> dict[str, str]:
        """The filter as query parameters (what the list links and bulk forms carry)."""
        values = {
            "environment": self.environment.name if self.environment else "",
            "band": self.band,
            "diagnosis": self.diagnosis,
            "status": self.status,
            "flag": self.flag,
            "q": self.search,
            "mine": "1" if self.mine else "",
            "domain": self.domain,
        }
        return {name: value for name, value in values.items() if value}


def _choice(params: Mapping, name: str, choices) -> str:
    value = str(params.get(name) or "")
    if value and value not in choices:
        raise TaskFilterError(name, f"{value!r} is not one of {', '.join(choices)}.")
    return value


def _named(params: Mapping, name: str, model, lookup: str = "name"):
    value = str(params.get(name) or "")
    if not value:
        return None
    found = model.objects.filter(**{lookup: value}).first()
    if found is None:
        raise TaskFilterError(name, f"no {model._meta.verbose_name} named {value!r}.", missing=True)
    return found


def _fraction(params: Mapping, name: str) -> float | None:
    value = params.get(name)
    if value in (None, ""):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise TaskFilterError(name, f"{value!r} is not a number.") from None
    if not 0 <= number <= 1:
        raise TaskFilterError(name, f"{number} is not between 0 and 1.")
    return number


def _flag_choice(params: Mapping, name: str) -> bool | None:
    value = params.get(name)
    if value is None or value == "":
        return None
    text = str(value).lower()
    if text not in ("true", "false"):
        raise TaskFilterError(name, f"{value!r}: use true or false.")
    return text == "true"


def task_filter_parse(params: Mapping, *, required: tuple[str, ...] = ()) -> TaskFilter:
    """A TaskFilter from query parameters (PARAMS; a QueryDict, a JSON body or a dict of options).

    Raises TaskFilterError naming the parameter: a value out of its choices or range, or (with
    `missing`) an environment or probe model that does not exist. Without `model`, the calibration
    is that of the model used most recently on the environment.
    """
    for name in required:
        if not params.get(name):
            raise TaskFilterError(name, "required.")
    environment = _named(params, "environment", Environment)
    probe_model = _named(params, "model", ProbeModel) or calibration_selectors.default_probe_model(environment)
    updated_since = None
    if params.get("updated_since"):
        updated_since = parse_datetime(str(params["updated_since"]))
        if updated_since is None:
            raise TaskFilterError("updated_since", f"{params['updated_since']!r} is not an ISO 8601 date and time.")
    mine = params.get("mine", "")
    if isinstance(mine, str) and mine.lower() not in TRUE + FALSE:
        raise TaskFilterError("mine", f"{mine!r}: use true or false.")
    sort = str(params.get("sort") or "key")
    return TaskFilter(
        environment=environment,
        probe_model=probe_model,
        band=_choice(params, "band", Band.values),
        diagnosis=_choice(params, "diagnosis", Diagnosis.values),
        status=_choice(params, "status", TaskStatus.values),
        flag=_choice(params, "flag", FLAGS),
        search=str(params.get("q") or "").strip(),
        mine=mine is True or (isinstance(mine, str) and mine.lower() in TRUE),
        domain=str(params.get("domain") or ""),
        pass_rate_min=_fraction(params, "pass_rate_min"),
        pass_rate_max=_fraction(params, "pass_rate_max"),
        updated_since=updated_since,
        contaminated=_flag_choice(params, "contaminated"),
        near_duplicate=_flag_choice(params, "near_duplicate"),
        sort=sort if sort in calibration_selectors.SORTS else "key",
    )


def task_filter_make(
    *,
    environment: Environment | None = None,
    probe_model: ProbeModel | None = None,
    band: str = "",
    status: str = "",
    flag: str = "",
    domain: str = "",
    exclude_contaminated: bool = False,
) -> TaskFilter:
    """A TaskFilter from values a service was given (not parameters to look up); choices are checked."""
    values = {"band": band, "status": status, "flag": flag}
    return TaskFilter(
        environment=environment,
        probe_model=probe_model,
        band=_choice(values, "band", Band.values),
        status=_choice(values, "status", TaskStatus.values),
        flag=_choice(values, "flag", FLAGS),
        domain=domain,
        contaminated=False if exclude_contaminated else None,
    )


def with_keys(task_filter: TaskFilter, keys) -> TaskFilter:
    """The same filter, limited to these task keys (bulk actions name tasks one by one)."""
    return replace(task_filter, keys=tuple(keys))


def _similarity(task_filter: TaskFilter) -> tuple[tuple[str, bool | None], ...]:
    return (
        (SimilarityFlag.Kind.CONTAMINATED, task_filter.contaminated),
        (SimilarityFlag.Kind.NEAR_DUPLICATE, task_filter.near_duplicate),
    )


def tasks_matching(*, user: AbstractBaseUser, task_filter: TaskFilter) -> QuerySet[Task]:
    """The tasks `user` may see that match, annotated with their calibration (calibration.selectors)."""
    f = task_filter
    tasks = calibration_selectors.tasks_with_calibration(
        user=user,
        environment=f.environment,
        probe_model=f.probe_model,
        band=f.band,
        status=f.status,
        search=f.search,
        sort=f.sort,
        owner=user if f.mine else None,
        flag=f.flag,
        diagnosis=f.diagnosis,
    )
    if f.domain:
        tasks = tasks.filter(current_version__domain=f.domain)
    if f.pass_rate_min is not None:
        tasks = tasks.filter(pass_rate__gte=f.pass_rate_min)
    if f.pass_rate_max is not None:
        tasks = tasks.filter(pass_rate__lte=f.pass_rate_max)
    if f.updated_since is not None:
        tasks = tasks.filter(updated_at__gte=f.updated_since)
    for kind, present in _similarity(f):
        if present is not None:
            tasks = similarity_selectors.tasks_filter_flag(tasks, kind=kind, present=present)
    if f.keys is not None:
        tasks = tasks.filter(key__in=f.keys)
    return tasks


def versions_matching(versions: QuerySet[TaskVersion], *, task_filter: TaskFilter) -> QuerySet[TaskVersion]:
    """The same filter over current versions annotated with `calibration`, a FilteredRelation to the
    calibration under task_filter.probe_model (what exports and releases stream); `mine` is not applied."""
    f = task_filter
    if f.environment is not None:
        versions = versions.filter(task__environment=f.environment)
    if f.status:
        versions = versions.filter(task__status=f.status)
    if f.domain:
        versions = versions.filter(domain=f.domain)
    if f.search:
        versions = versions.filter(Q(task__key__icontains=f.search) | Q(prompt__icontains=f.search))
    if f.band:
        versions = versions.filter(calibration__band=f.band)
    if f.diagnosis:
        versions = versions.filter(calibration__diagnosis=f.diagnosis)
    if f.flag == AUDIT_FAILED:
        versions = versions.filter(audit_passed=False)
    elif f.flag == curation_selectors.GAMEABLE:
        versions = versions.filter(curation_selectors.gameable_q(version=""))
    elif f.flag:
        flags_text = Cast("calibration__flags", TextField())
        versions = versions.annotate(flags_text=flags_text).filter(flags_text__contains=f'"{f.flag}"')
    if f.pass_rate_min is not None:
        versions = versions.filter(calibration__pass_rate__gte=f.pass_rate_min)
    if f.pass_rate_max is not None:
        versions = versions.filter(calibration__pass_rate__lte=f.pass_rate_max)
    if f.updated_since is not None:
        versions = versions.filter(task__updated_at__gte=f.updated_since)
    for kind, present in _similarity(f):
        if present is not None:
            condition = similarity_selectors.flagged(kind, version="pk")
            versions = versions.filter(condition if present else ~condition)
    if f.keys is not None:
        versions = versions.filter(task__key__in=f.keys)
    return versions
