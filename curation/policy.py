"""Who may see and do what: the one permission policy of pages, the API, services and commands.

One answer everywhere. An object the caller may not see is 404 (`Http404`: not even its existence
is confirmed); a visible object the caller may not act on is 403 (`PermissionDenied`); a route
whose role the caller lacks is 403 too (signed-out callers go to the login page, or get 401 from the
API). DRF turns both exceptions into its JSON answers, so pages and the API agree.

Roles are Django groups (accounts.permissions): authors upload and change their own tasks,
reviewers judge every task, leads are reviewers who also share out the queue, adjudicate and keep
gold items, trainers use the API only, staff may do everything. Each route names
its gate and the object it acts on in ROUTES (curation.routes); views take their gate from there
(`page`, `api`) and load their object through `get_for` or `require`.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps

from django.contrib.auth.models import AbstractBaseUser
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.db.models import Model, Q, QuerySet
from django.http import Http404
from rest_framework.permissions import IsAuthenticated

from accounts.authentication import scope_required
from accounts.permissions import AUTHORS, LEADS, REVIEWERS, TRAINERS, group_names, in_group
from curation.models import Task, TaskStatus
from curation.routes import API, BROWSER, CURATORS, PUBLIC, ROUTES, SIGNED_IN, STAFF, Route

# What each role sees of the corpus. Reviewers and staff see everything (they judge it); trainers
# see what they may train on or report about (approved, active and retired tasks), never drafts
# or work under review; authors see their own tasks and the approved and active ones of others.
TRAINABLE = (TaskStatus.APPROVED, TaskStatus.ACTIVE, TaskStatus.RETIRED)
PUBLISHED = (TaskStatus.APPROVED, TaskStatus.ACTIVE)
SEE, CHANGE, REVIEW, RETIRE, DISCUSS, PROBE, EXPORT = "see", "change", "review", "retire", "discuss", "probe", "export"
ADJUDICATE = "adjudicate"
# Probe impossible variants (calibration/services/impossible_variants.py): staff over an environment, the owner
# (or staff) over one task.
PROBE_VARIANTS = "probe_variants"


# Roles ------------------------------------------------------------------------------------------


def is_reviewer(user: AbstractBaseUser) -> bool:
    return in_group(user, REVIEWERS)


def is_lead(user: AbstractBaseUser) -> bool:
    """Leads (and staff): see who holds what, assign and reassign, adjudicate, keep gold items."""
    return in_group(user, LEADS)


def is_author(user: AbstractBaseUser) -> bool:
    return in_group(user, AUTHORS)


def is_trainer(user: AbstractBaseUser) -> bool:
    return in_group(user, TRAINERS)


def is_browser_user(user: AbstractBaseUser) -> bool:
    """Anyone signed in except trainer-only accounts, who use the API."""
    if not user.is_authenticated:
        return False
    return in_group(user, AUTHORS, REVIEWERS) or TRAINERS not in group_names(user)


GATES: dict[str, Callable[[AbstractBaseUser], bool]] = {
    PUBLIC: lambda user: True,
    SIGNED_IN: lambda user: user.is_authenticated,
    BROWSER: is_browser_user,
    AUTHORS: is_author,
    REVIEWERS: is_reviewer,
    LEADS: is_lead,
    CURATORS: lambda user: in_group(user, AUTHORS, REVIEWERS),
    STAFF: lambda user: user.is_authenticated and user.is_staff,
    TRAINERS: is_trainer,
}
GATE_REFUSALS = {
    BROWSER: "Trainer accounts use the API.",
    AUTHORS: "This page is for authors.",
    REVIEWERS: "This page is for reviewers.",
    LEADS: "This page is for leads.",
    CURATORS: "This is for authors and reviewers.",
    STAFF: "This is for staff.",
    TRAINERS: "Releases are for trainers and staff (the API's export scope).",
}


# Tasks and what hangs off them (versions, calibrations, rollouts, comments) ---------------------


def _task_statuses(user: AbstractBaseUser) -> tuple[str, ...] | None:
    """The statuses of others' tasks `user` sees; None: every task."""
    if not user.is_authenticated:
        return ()
    if is_reviewer(user):
        return None
    return TRAINABLE if TRAINERS in group_names(user) else PUBLISHED


def tasks_visible_to(user: AbstractBaseUser) -> QuerySet[Task]:
    """The tasks `user` may see, by role (see TRAINABLE and PUBLISHED above)."""
    statuses = _task_statuses(user)
    if statuses is None:
        return Task.objects.all()
    if not user.is_authenticated:
        return Task.objects.none()
    return Task.objects.filter(Q(owner=user) | Q(status__in=statuses))


def task_may_see(user: AbstractBaseUser, task) -> bool:
    statuses = _task_statuses(user)
    return statuses is None or (user.is_authenticated and task.owner_id == user.pk) or task.status in statuses


def task_may_change(user: AbstractBaseUser, task) -> bool:
    """Edit, submit, probe: the task's author, or staff."""
    return user.is_authenticated and (task.owner_id == user.pk or user.is_staff)


def task_may_review(user: AbstractBaseUser, task) -> bool:
    """Reviewers and staff; a reviewer never decides their own task (staff may)."""
    return is_reviewer(user) and (task.owner_id != user.pk or user.is_staff)


def task_may_discuss(user: AbstractBaseUser, task) -> bool:
    """Comment and resolve comments: the task's author and reviewers."""
    return user.is_authenticated and (task.owner_id == user.pk or is_reviewer(user))


def task_may_retire(user: AbstractBaseUser, task) -> bool:
    """Take a task out of the corpus by hand (near-duplicates): reviewers and staff."""
    return is_reviewer(user)


# Blind items (review.models.BlindItem.Kind) a person decided first: that person never gives the second,
# independent verdict. Named by value: curation does not import review (tests/review/test_app.py holds them equal).
DECIDED_BY_A_PERSON = ("double_review",)


def blind_item_may_review(user: AbstractBaseUser, item) -> bool:
    """Reviewers give blind verdicts, never on their own task, nor on an item whose decision is theirs."""
    if item.kind in DECIDED_BY_A_PERSON and user.is_authenticated and item.decided_by == user.get_username():
        return False
    return task_may_review(user, item.task_version.task)


def _owner_or_staff(owner_field: str) -> Callable[[AbstractBaseUser, Model], bool]:
    def rule(user, obj) -> bool:
        return user.is_authenticated and (getattr(obj, owner_field) == user.pk or user.is_staff)

    return rule


def _owner_only(owner_field: str) -> Callable[[AbstractBaseUser, Model], bool]:
    def rule(user, obj) -> bool:
        return user.is_authenticated and getattr(obj, owner_field) == user.pk

    return rule


def release_may_see(user: AbstractBaseUser, release) -> bool:
    """Trainers, reviewers and staff share every release; anyone else sees the ones they made."""
    return in_group(user, TRAINERS, REVIEWERS) or (user.is_authenticated and release.created_by_id == user.pk)


def releases_visible_q(user: AbstractBaseUser) -> Q:
    """The filter of releases_visible_to (Release lives in a layer above this one)."""
    if in_group(user, TRAINERS, REVIEWERS):
        return Q()
    return Q(created_by=user) if user.is_authenticated else Q(pk__in=[])


def _signed_in(user, obj) -> bool:
    return user.is_authenticated


def _by_task(rule: Callable[[AbstractBaseUser, Task], bool]) -> Callable[[AbstractBaseUser, Model], bool]:
    return lambda user, obj: rule(user, obj.task)


# (model name, action) -> rule. Seeing comes first: `require` answers 404 when it fails.
RULES: dict[tuple[str, str], Callable[[AbstractBaseUser, Model], bool]] = {
    ("task", SEE): task_may_see,
    ("task", CHANGE): task_may_change,
    ("task", PROBE): task_may_change,
    ("task", REVIEW): task_may_review,
    ("task", DISCUSS): task_may_discuss,
    ("task", RETIRE): task_may_retire,
    ("task", EXPORT): lambda user, task: task_may_see(user, task) and in_group(user, TRAINERS),
    ("taskversion", SEE): _by_task(task_may_see),
    ("comment", SEE): _by_task(task_may_see),
    ("comment", CHANGE): _by_task(task_may_discuss),
    ("environment", SEE): _signed_in,
    ("environment", CHANGE): lambda user, environment: is_reviewer(user),
    ("environment", PROBE): lambda user, environment: is_author(user),
    ("environment", PROBE_VARIANTS): lambda user, environment: user.is_authenticated and user.is_staff,
    ("task", PROBE_VARIANTS): task_may_change,
    ("campaign", SEE): _signed_in,
    ("reprofile", SEE): _signed_in,  # a checkpoint re-profile: its stage, counts and campaigns, as a campaign's page
    ("campaign", CHANGE): _owner_or_staff("created_by_id"),
    # Training traces of its rollouts (of the tasks the trainer may see): what the API's export scope may do.
    ("campaign", EXPORT): lambda user, campaign: is_trainer(user),
    ("importjob", SEE): _owner_or_staff("owner_id"),
    ("importjob", CHANGE): _owner_or_staff("owner_id"),
    # A saved column mapping is shared in its environment; only who saved it (or staff) may overwrite it.
    ("importmapping", SEE): _signed_in,
    ("importmapping", CHANGE): _owner_or_staff("created_by_id"),
    ("release", SEE): release_may_see,
    ("release", CHANGE): release_may_see,
    ("release", EXPORT): release_may_see,
    ("apitoken", SEE): _owner_only("user_id"),
    ("apitoken", CHANGE): _owner_only("user_id"),
    ("probemodel", SEE): _signed_in,
    ("probemodel", CHANGE): lambda user, probe_model: user.is_authenticated and user.is_staff,
    # Blind review (review.blind_reviews): reviewers only; never an item of their own task (staff may).
    ("blinditem", SEE): lambda user, item: is_reviewer(user),
    ("blinditem", REVIEW): lambda user, item: blind_item_may_review(user, item),
    # A lead settles two reviewers' disagreement; never on their own task (staff may).
    ("blinditem", ADJUDICATE): lambda user, item: is_lead(user) and task_may_review(user, item.task_version.task),
    ("mcpserver", SEE): lambda user, server: user.is_authenticated and user.is_staff,
    ("mcpserver", CHANGE): lambda user, server: user.is_authenticated and user.is_staff,
}
REFUSALS = {
    ("task", CHANGE): "Only the task's author can change it.",
    ("task", PROBE): "Only the task's author can probe it.",
    ("task", REVIEW): "Only reviewers decide tasks, and never their own.",
    ("task", DISCUSS): "Only the task's author and reviewers can discuss it.",
    ("comment", CHANGE): "Only the task's author and reviewers can resolve comments.",
    ("campaign", CHANGE): "Only the person who started a campaign, or staff, can change it.",
    ("campaign", EXPORT): "Only trainers and staff export a campaign's training traces.",
    ("environment", CHANGE): "Only reviewers and staff change environments.",
    ("probemodel", CHANGE): "Only staff change probe models.",
    ("blinditem", REVIEW): "This item is of your own task, or you decided it first: another reviewer must judge it.",
    ("mcpserver", CHANGE): "Only staff change MCP servers.",
    ("environment", PROBE_VARIANTS): "Only staff probe an environment's impossible variants.",
    ("task", PROBE_VARIANTS): "Only the task's author, or staff, can probe its impossible variant.",
}


def allows(user: AbstractBaseUser, action: str, obj: Model) -> bool:
    """Whether `user` may do `action` (see, change, review, ...) to `obj`; False for unknown pairs."""
    kind = obj._meta.model_name
    if (kind, SEE) not in RULES or not RULES[(kind, SEE)](user, obj):
        return False
    rule = RULES.get((kind, action))
    return rule is not None and rule(user, obj)


def require(user: AbstractBaseUser, action: str, obj: Model) -> Model:
    """`obj` when `user` may do `action` to it; Http404 when they may not see it, else PermissionDenied."""
    kind = obj._meta.model_name
    if not allows(user, SEE, obj):
        raise Http404(f"No such {obj._meta.verbose_name}, or it is not yours to see.")
    if action != SEE and not allows(user, action, obj):
        raise PermissionDenied(REFUSALS.get((kind, action), f"You may not {action} this {obj._meta.verbose_name}."))
    return obj


def get_for(user: AbstractBaseUser, action: str, queryset: QuerySet, **lookup) -> Model:
    """The object of `queryset` matching `lookup` that `user` may `action`, by the answers of `require`."""
    obj = queryset.filter(**lookup).first()
    if obj is None:
        raise Http404(f"No such {queryset.model._meta.verbose_name}.")
    return require(user, action, obj)


# Routes -----------------------------------------------------------------------------------------


def route(name: str) -> Route:
    """The declared policy of the URL named `name` (KeyError for a route nobody declared)."""
    return ROUTES[name]


def page(name: str):
    """Decorate a page view with its route's gate: login first, then the role (403), else the view."""
    declared = route(name)
    if declared.gate.startswith(API):
        raise ValueError(f"{name} is an API route; use policy.api")

    def decorator(view):
        @wraps(view)
        def wrapper(request, *args, **kwargs):
            user = request.user
            if declared.gate != PUBLIC and not user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            if not GATES[declared.gate](user):
                raise PermissionDenied(GATE_REFUSALS.get(declared.gate, "Not for your role."))
            return view(request, *args, **kwargs)

        wrapper.policy_route = name
        return wrapper

    return decorator


def api(name: str):
    """Decorate a DRF view class with its route's gate: a token holding the route's scope (else 401/403)."""
    declared = route(name)
    scope = declared.gate.removeprefix(API)
    if not declared.gate.startswith(API) or not scope:
        raise ValueError(f"{name} is not an API route with a scope")

    def decorator(view_class):
        view_class.permission_classes = [IsAuthenticated, scope_required(scope)]
        view_class.policy_route = name
        return view_class

    return decorator
