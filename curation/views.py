from django.conf import settings
from django.contrib import messages
from django.db.models import Count
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render

from calibration.models import Band, ProbeModel, Rollout
from calibration.packing import unpack_logprobs, unpack_tokens
from curation import selectors, services
from curation.errors import CurationError
from curation.models import Environment, TaskStatus
from curation.permissions import AUTHORS, browser_user_required, group_required, in_group


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
