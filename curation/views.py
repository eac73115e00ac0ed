import json
import math
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.db.models import Count
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from calibration import services as calibration_services
from calibration.errors import CalibrationError
from calibration.models import Band, ProbeModel, Rollout
from calibration.selectors import rollouts_for_viewer
from curation import review_selectors, review_services, selectors, services
from curation.errors import CurationError
from curation.models import Comment, Environment, TaskStatus
from curation.permissions import (
    AUTHORS,
    REVIEWERS,
    browser_user_required,
    group_required,
    in_group,
)
from engine.episodes import world as episode_world
from engine.packing import unpack_logprobs, unpack_tokens


@browser_user_required
def environment_list(request):
    return render(
        request,
        "curation/environment_list.html",
        {
            "rows": selectors.environments_overview(user=request.user),
            "probe_models": ProbeModel.objects.all(),
            "can_author": in_group(request.user, AUTHORS),
            "bands": Band.values,
        },
    )


@browser_user_required
def task_list(request):
    environment = None
    if request.GET.get("environment"):
        environment = get_object_or_404(Environment, name=request.GET["environment"])
    probe_model = None
    if request.GET.get("model"):
        probe_model = get_object_or_404(ProbeModel, name=request.GET["model"])
    probe_model = probe_model or selectors.default_probe_model(environment)
    sort = request.GET.get("sort", "key")
    tasks = selectors.tasks_with_calibration(
        user=request.user,
        environment=environment,
        probe_model=probe_model,
        band=request.GET.get("band", ""),
        status=request.GET.get("status", ""),
        search=request.GET.get("q", "").strip(),
        sort=sort,
        owner=request.user if request.GET.get("mine") else None,
        flag=request.GET.get("flag", ""),
    )
    page_size = 100
    page = int(request.GET["page"]) if request.GET.get("page", "").isdigit() else 1
    page = max(page, 1)
    total = tasks.count()
    return render(
        request,
        "curation/task_list.html",
        {
            "tasks": tasks[(page - 1) * page_size : page * page_size],
            "total": total,
            "page": page,
            "has_next": page * page_size < total,
            "environment": environment,
            "environments": Environment.objects.all(),
            "probe_model": probe_model,
            "probe_models": ProbeModel.objects.all(),
            "bands": Band.values,
            "statuses": TaskStatus.values,
            "flags": ["verifier_trouble", "zero_variance", "audit_failed"],
            "sort": sort,
            "query": _query_without(request, "sort", "page"),
        },
    )


def _query_without(request, *names: str) -> str:
    params = request.GET.copy()
    for name in names:
        params.pop(name, None)
    return params.urlencode()


@browser_user_required
def task_detail(request, environment_name: str, key: str):
    task = (
        selectors.tasks_visible_to(request.user)
        .select_related("environment", "current_version", "owner")
        .filter(environment__name=environment_name, key=key)
        .first()
    )
    if task is None:
        raise Http404("No such task, or it is not yours to see.")
    version = task.current_version
    rollouts = (
        Rollout.objects.filter(task_version=version)
        .select_related("probe_model")
        .order_by("probe_model__name", "campaign_id", "sample_index")
    )
    outcome = request.GET.get("outcome", "")
    if outcome:
        rollouts = rollouts.filter(outcome=outcome)
    rollouts = list(rollouts[:200])
    for rollout in rollouts:
        ids = unpack_tokens(rollout.completion_token_ids)
        rollout.completion_tokens = len(ids) if ids is not None else None
        logprobs = unpack_logprobs(rollout.logprobs)
        rollout.mean_logprob = sum(logprobs) / len(logprobs) if logprobs else None
    return render(
        request,
        "curation/task_detail.html",
        {
            "task": task,
            "version": version,
            "versions": task.versions.order_by("-number"),
            "calibrations": version.calibrations.select_related("probe_model") if version else [],
            "rollouts": rollouts,
            "outcome_counts": Rollout.objects.filter(task_version=version).values("outcome").annotate(count=Count("id")),
            "status_changes": task.status_changes.select_related("changed_by"),
            "reviews": task.reviews.select_related("reviewer", "task_version"),
            "threads": review_selectors.comment_threads(task=task),
            "can_comment": task.owner_id == request.user.pk or in_group(request.user, REVIEWERS),
            "can_review": task.status in review_services.REVIEWABLE and in_group(request.user, REVIEWERS),
            "editable_statuses": services.EDITABLE_STATUSES,
            "probe_models": ProbeModel.objects.all(),
            "trajectories_query": urlencode({"environment": task.environment.name, "task": task.key}),
            "outcome": outcome,
            "is_owner": task.owner_id == request.user.pk,
        },
    )


@group_required(AUTHORS)
def task_upload(request):
    environments = Environment.objects.all()
    context = {"environments": environments, "report": None}
    if request.method == "POST":
        environment = get_object_or_404(Environment, name=request.POST.get("environment", ""))
        upload = request.FILES.get("file")
        context["selected"] = environment.name
        if upload is None:
            messages.error(request, "Choose a task file (.jsonl or .csv) to upload.")
        elif upload.size > settings.PASSBAND_MAX_UPLOAD_BYTES:
            messages.error(
                request,
                f"{upload.name} is {upload.size:,} bytes; the limit is {settings.PASSBAND_MAX_UPLOAD_BYTES:,}. Split it.",
            )
        else:
            try:
                report = services.tasks_import(
                    environment=environment, owner=request.user, data=upload.read(), filename=upload.name
                )
                messages.success(request, report.summary())
            except services.ImportRejected as rejected:
                report = rejected.report
                messages.error(request, report.summary())
            context["report"] = report
        status = 400 if context["report"] is None or not context["report"].ok else 200
        return render(request, "curation/task_upload.html", context, status=status)
    context["selected"] = request.GET.get("environment", "")
    return render(request, "curation/task_upload.html", context)


@group_required(AUTHORS)
def task_submit(request, environment_name: str, key: str):
    if request.method != "POST":
        return redirect("task_detail", environment_name=environment_name, key=key)
    task = get_object_or_404(selectors.tasks_visible_to(request.user), environment__name=environment_name, key=key)
    if task.owner_id != request.user.pk and not request.user.is_staff:
        raise Http404("Only the task's author can submit it.")
    try:
        services.task_transition(task=task, to_status=TaskStatus.SUBMITTED, by=request.user)
        messages.success(request, f"{task.key} was submitted for review.")
    except CurationError as error:
        messages.error(request, str(error))
    return redirect("task_detail", environment_name=environment_name, key=key)


def _visible_task(request, environment_name: str, key: str):
    return get_object_or_404(
        selectors.tasks_visible_to(request.user).select_related("environment", "current_version", "owner"),
        environment__name=environment_name,
        key=key,
    )


QUEUE_FILTERS = ("environment", "band", "flag", "q")


def _queue_from_request(request):
    environment = None
    if request.GET.get("environment"):
        environment = get_object_or_404(Environment, name=request.GET["environment"])
    return review_selectors.review_queue(
        user=request.user,
        environment=environment,
        band=request.GET.get("band", ""),
        flag=request.GET.get("flag", ""),
        search=request.GET.get("q", "").strip(),
    )


def _queue_url(params, position: int) -> str:
    query = {name: params.get(name) for name in QUEUE_FILTERS if params.get(name)}
    query["position"] = position
    return reverse("review_queue") + "?" + urlencode(query)


@group_required(REVIEWERS)
def review_queue(request):
    queue = _queue_from_request(request)
    total = queue.count()
    position = int(request.GET["position"]) if request.GET.get("position", "").isdigit() else 0
    position = min(position, max(total - 1, 0))
    task = queue[position] if total else None
    context = {
        "task": task,
        "total": total,
        "position": position,
        "upcoming": queue[max(position - 5, 0) : position + 15],
        "upcoming_start": max(position - 5, 0),
        "filters": {name: request.GET.get(name, "") for name in QUEUE_FILTERS},
        "filter_query": urlencode({name: request.GET[name] for name in QUEUE_FILTERS if request.GET.get(name)}),
        "environments": Environment.objects.all(),
        "bands": Band.values,
        "flags": review_selectors.PRIORITIES[:-1],
        "progress": review_selectors.reviewer_progress(),
        "previous_url": _queue_url(request.GET, position - 1) if position > 0 else "",
        "next_url": _queue_url(request.GET, position + 1) if position + 1 < total else "",
    }
    if task is not None:
        version = task.current_version
        context.update(
            version=version,
            calibrations=version.calibrations.select_related("probe_model") if version else [],
            rollouts=Rollout.objects.filter(task_version=version).select_related("probe_model").order_by("sample_index")[:12],
            outcome_counts=Rollout.objects.filter(task_version=version).values("outcome").annotate(count=Count("id")),
            threads=review_selectors.comment_threads(task=task),
            status_changes=task.status_changes.select_related("changed_by"),
            own_task=task.owner_id == request.user.pk and not request.user.is_staff,
        )
    return render(request, "curation/review_queue.html", context)


REVIEW_ACTIONS = {
    "claim": lambda task, reviewer, comment: review_services.review_claim(task=task, reviewer=reviewer),
    "approve": lambda task, reviewer, comment: review_services.review_approve(task=task, reviewer=reviewer, comment=comment),
    "reject": lambda task, reviewer, comment: review_services.review_reject(task=task, reviewer=reviewer, comment=comment),
    "send_back": lambda task, reviewer, comment: review_services.review_send_back(task=task, reviewer=reviewer, comment=comment),
}
DONE_MESSAGES = {"claim": "is in review", "approve": "was approved", "reject": "was rejected", "send_back": "was sent back to its author"}


@require_POST
@group_required(REVIEWERS)
def review_action(request, environment_name: str, key: str, action: str):
    if action not in REVIEW_ACTIONS:
        raise Http404(f"Unknown review action {action!r}.")
    task = _visible_task(request, environment_name, key)
    try:
        REVIEW_ACTIONS[action](task, request.user, request.POST.get("comment", ""))
        messages.success(request, f"{task.key} {DONE_MESSAGES[action]}.")
    except CurationError as error:
        messages.error(request, str(error))
    if request.POST.get("next") == "task":
        return redirect("task_detail", environment_name=environment_name, key=key)
    position = int(request.POST["position"]) if request.POST.get("position", "").isdigit() else 0
    return redirect(_queue_url(request.POST, position))


@require_POST
@group_required(REVIEWERS)
def review_bulk(request):
    decision = request.POST.get("decision", "")
    # The filter travels in the query string so that "everything matching" means the same as on the page.
    queue = _queue_from_request(request)
    try:
        result = review_services.reviews_bulk(
            tasks=queue, reviewer=request.user, decision=decision, comment=request.POST.get("comment", "")
        )
    except CurationError as error:
        messages.error(request, str(error))
    else:
        label = {"approve": "approved", "reject": "rejected", "send_back": "sent back"}[decision]
        messages.success(request, f"{len(result.decided)} task(s) {label}; {len(result.skipped)} skipped.")
        for line in result.skipped[:20]:
            messages.warning(request, line)
    return redirect(_queue_url(request.GET, 0))


@require_POST
@browser_user_required
def comment_create(request, environment_name: str, key: str):
    task = _visible_task(request, environment_name, key)
    parent = None
    if request.POST.get("parent", "").isdigit():
        parent = get_object_or_404(Comment, pk=int(request.POST["parent"]), task=task)
    try:
        review_services.comment_add(task=task, author=request.user, body=request.POST.get("body", ""), parent=parent)
    except CurationError as error:
        if task.owner_id != request.user.pk and not in_group(request.user, REVIEWERS):
            raise PermissionDenied(str(error)) from error
        messages.error(request, str(error))
    return _back(request, task)


@require_POST
@browser_user_required
def comment_resolve(request, comment_id: int):
    comment = get_object_or_404(
        Comment.objects.select_related("task__environment"),
        pk=comment_id,
        task__in=selectors.tasks_visible_to(request.user),
    )
    try:
        review_services.comment_resolve(comment=comment, by=request.user)
    except CurationError as error:
        raise PermissionDenied(str(error)) from error
    return _back(request, comment.task)


def _back(request, task):
    target = request.POST.get("next", "")
    if target.startswith("/review/"):
        return redirect(target)
    return redirect("task_detail", environment_name=task.environment.name, key=task.key)


def _owned_task(request, environment_name: str, key: str):
    """The task if the user may see it; 403 when they may see but not change it."""
    task = _visible_task(request, environment_name, key)
    if task.owner_id != request.user.pk and not request.user.is_staff:
        raise PermissionDenied("Only the task's author can change it.")
    return task


def _editor_content(post) -> tuple[dict, list[str]]:
    """Parse the editor form into task fields; JSON fields that do not parse are named."""
    problems = []
    content: dict = {"answer": post.get("answer", "")}
    prompt_text = post.get("prompt", "")
    if post.get("prompt_format") == "messages":
        try:
            content["prompt"] = json.loads(prompt_text)
        except json.JSONDecodeError as error:
            problems.append(f"prompt: not valid JSON ({error.msg} at line {error.lineno}, column {error.colno})")
    else:
        content["prompt"] = prompt_text
    for name, default in (("verifier", "{}"), ("tools", "[]"), ("metadata", "{}")):
        raw = post.get(name, "").strip() or default
        try:
            content[name] = json.loads(raw)
        except json.JSONDecodeError as error:
            problems.append(f"{name}: not valid JSON ({error.msg} at line {error.lineno}, column {error.colno})")
    if post.get("domain", "").strip():
        content["domain"] = post["domain"].strip()
    if post.get("authoring_cost_usd", "").strip():
        content["authoring_cost_usd"] = post["authoring_cost_usd"].strip()
    if content.get("verifier") == {}:
        content.pop("verifier")
    return content, problems


@group_required(AUTHORS)
def task_edit(request, environment_name: str, key: str):
    task = _owned_task(request, environment_name, key)
    version = task.current_version
    single_user_prompt = len(version.prompt) == 1 and version.prompt[0]["role"] == "user"
    form = {
        "prompt_format": "text" if single_user_prompt else "messages",
        "prompt": version.prompt[0]["content"] if single_user_prompt else json.dumps(version.prompt, indent=2),
        "answer": version.answer,
        "verifier": json.dumps(version.verifier, indent=2),
        "tools": json.dumps(version.tools, indent=2) if version.tools else "",
        "metadata": json.dumps(version.metadata, indent=2) if version.metadata else "",
        "domain": version.domain,
        "authoring_cost_usd": str(version.authoring_cost_usd),
    }
    status = 200
    if request.method == "POST":
        form.update({name: request.POST.get(name, "") for name in form})
        content, problems = _editor_content(request.POST)
        if not problems:
            try:
                new_version = services.task_version_edit(task=task, by=request.user, content=content)
            except CurationError as error:
                problems = [str(error)]
            else:
                audit = "passed its audit" if new_version.audit_passed else "FAILED its audit: " + "; ".join(new_version.audit_problems)
                messages.success(request, f"Saved version {new_version.number} of {task.key}; it {audit}.")
                return redirect("task_detail", environment_name=environment_name, key=key)
        for problem in problems:
            messages.error(request, problem)
        status = 400
    return render(
        request,
        "curation/task_edit.html",
        {"task": task, "version": version, "form": form, "editable": task.status in services.EDITABLE_STATUSES},
        status=status,
    )


@require_POST
@group_required(AUTHORS)
def task_probe(request, environment_name: str, key: str):
    """Probe now: a campaign over this one task's current version."""
    task = _owned_task(request, environment_name, key)
    probe_model = get_object_or_404(ProbeModel, name=request.POST.get("model", ""))
    try:
        campaign = calibration_services.campaign_start(
            environment=task.environment,
            probe_model=probe_model,
            created_by=request.user,
            policy=request.POST.get("policy", "adaptive"),
            rollouts=int(request.POST.get("rollouts", "16")),
            task_versions=[task.current_version],
        )
    except (CalibrationError, ValueError) as error:
        messages.error(request, f"Could not start the probe: {error}")
        return redirect("task_detail", environment_name=environment_name, key=key)
    messages.success(request, f"Probing {task.key} with {probe_model.name}: campaign {campaign.pk} started.")
    return redirect("campaign_detail", campaign_id=campaign.pk)


TOKENS_SHOWN = 2048


def _token_rows(rollout) -> list[dict]:
    """Completion tokens with their logprobs, for shading: low probability is darker."""
    ids = unpack_tokens(rollout.completion_token_ids) or []
    logprobs = unpack_logprobs(rollout.logprobs) or []
    rows = []
    for index, token_id in enumerate(ids[:TOKENS_SHOWN]):
        logprob = logprobs[index] if index < len(logprobs) else None
        probability = math.exp(logprob) if logprob is not None else None
        rows.append(
            {
                "id": token_id,
                "logprob": logprob,
                "probability": probability,
                # 0 (certain) .. 100 (very unlikely), as a percentage for the inline shade.
                "shade": round(100 * (1 - probability)) if probability is not None else 0,
            }
        )
    return rows


def _episode_state_changes(episode: dict | None) -> list[dict] | None:
    """What an episode changed in its world: the final state against a fresh reset of the same seed."""
    if not episode or episode.get("final_state") is None:
        return None
    try:
        before = episode_world.initial_state(environment=episode["environment"], seed=episode["seed"])
    except (KeyError, ValueError):
        return None  # an environment this server does not know: show the final state only
    return episode_world.state_diff(before=before, after=episode["final_state"])


@browser_user_required
def trajectory_list(request):
    tasks = selectors.tasks_visible_to(request.user)
    environment = None
    if request.GET.get("environment"):
        environment = get_object_or_404(Environment, name=request.GET["environment"])
        tasks = tasks.filter(environment=environment)
    if request.GET.get("task"):
        tasks = tasks.filter(key=request.GET["task"])
    probe_model = ProbeModel.objects.filter(name=request.GET.get("model", "")).first()
    outcome = request.GET.get("outcome", "")
    search = request.GET.get("q", "").strip()
    versions = tasks.exclude(current_version=None).values("current_version")
    rollouts = rollouts_for_viewer(task_versions=versions, outcome=outcome, search=search, probe_model=probe_model)
    unfiltered = rollouts_for_viewer(task_versions=versions, search=search, probe_model=probe_model)
    outcome_counts = unfiltered.order_by().values("outcome").annotate(count=Count("id")).order_by("outcome")
    page_size = 25
    page = max(int(request.GET["page"]) if request.GET.get("page", "").isdigit() else 1, 1)
    shown = list(rollouts[(page - 1) * page_size : page * page_size + 1])
    has_next = len(shown) > page_size
    shown = shown[:page_size]
    for rollout in shown:
        rollout.state_changes = _episode_state_changes(rollout.episode)
        rollout.tokens = _token_rows(rollout)
        rollout.token_count = len(unpack_tokens(rollout.completion_token_ids) or [])
        rollout.prompt_token_count = len(unpack_tokens(rollout.prompt_token_ids) or [])
    return render(
        request,
        "curation/trajectory_list.html",
        {
            "rollouts": shown,
            "outcome_counts": outcome_counts,
            "outcome": outcome,
            "search": search,
            "environment": environment,
            "environments": Environment.objects.all(),
            "probe_model": probe_model,
            "probe_models": ProbeModel.objects.all(),
            "task_key": request.GET.get("task", ""),
            "page": page,
            "has_next": has_next,
            "query": _query_without(request, "page"),
            "outcome_query": _query_without(request, "page", "outcome"),
            "tokens_shown": TOKENS_SHOWN,
        },
    )
