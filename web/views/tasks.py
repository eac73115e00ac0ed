"""Pages for tasks: the environment list, the task list, a task, upload, edit, submit and probe."""

import json
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from accounts.errors import ServiceError
from calibration import selectors as calibration_selectors
from calibration.models import Band, Diagnosis, ProbeModel, Rollout
from curation import files, import_jobs, imports, policy, repo_uploads, selectors, services
from curation.errors import CurationError
from curation.models import Environment, ImportJob, TaskStatus
from engine import input_rules, stats
from engine.packing import token_count
from releases import task_filters
from review import services as review_services
from similarity import selectors as similarity_selectors
from web.views import probes, shared


@policy.page("environment_list")
def environment_list(request):
    return render(
        request,
        "curation/environment_list.html",
        {
            "rows": calibration_selectors.environments_overview(user=request.user),
            "probe_models": ProbeModel.objects.all(),
            "can_author": policy.is_author(request.user),
            "can_manage": policy.is_reviewer(request.user),
            "bands": Band.values,
        },
    )


@policy.page("task_list")
def task_list(request):
    task_filter = shared.task_filter(request.GET)
    environment, probe_model, sort = task_filter.environment, task_filter.probe_model, task_filter.sort
    tasks = task_filters.tasks_matching(user=request.user, task_filter=task_filter)
    # A row shows these columns (and the calibration's annotations): nothing else is read or decoded.
    rows = (
        tasks.select_related(None)
        .select_related("environment", "current_version")
        .only(
            "key",
            "status",
            "environment",
            "environment__name",
            "current_version",
            "current_version__audit_passed",
            "current_version__gameable",
            "current_version__gameable_override_at",
        )
    )
    shown, page, has_next = shared.page_of(request, rows, size=100, by_ids=True)
    calibrated_count = tasks.filter(band__isnull=False).count() if probe_model and shown else 0
    return render(
        request,
        "curation/task_list.html",
        {
            "tasks": shown,
            "total": tasks.count(),
            "page": page,
            "has_next": has_next,
            "environment": environment,
            "environments": Environment.objects.all(),
            "probe_model": probe_model,
            "probe_models": ProbeModel.objects.all(),
            "bands": Band.values,
            "diagnoses": Diagnosis.choices,
            "statuses": TaskStatus.values,
            "flags": [
                stats.Flag.VERIFIER_TROUBLE,
                stats.Flag.ZERO_VARIANCE,
                task_filters.AUDIT_FAILED,
                selectors.GAMEABLE,
            ],
            "sort": sort,
            "query": shared.query_without(request, "sort", "page"),
            "calibrated_count": calibrated_count,
            "can_author": policy.is_author(request.user),
            "can_review": policy.is_reviewer(request.user),
            # Submit is offered only for tasks this user can submit (theirs, a status that may move, audit passed).
            "submittable": selectors.tasks_submittable(tasks=tasks, user=request.user).count()
            if policy.is_author(request.user)
            else 0,
            # The Probe form's "matching this filter" carries the list's filter.
            "probe_filters": {name: request.GET.get(name, "") for name in probes.FILTER_FIELDS},
        },
    )


TASK_PAGE_ROLLOUTS = 50


def _interval_note(calibration, thresholds: stats.Thresholds) -> str:
    """Where the interval shown crosses a threshold line that the band seems to deny, how the band's rule
    differs from it: the stopping rule decides against the zones around each line, not the line."""
    low, high = calibration.interval_low, calibration.interval_high
    if low is None or high is None or calibration.band not in (Band.IN_BAND, Band.TOO_HARD, Band.RETIRE):
        return ""
    crossed = [line for line in (thresholds.floor, thresholds.retire_at) if low < line < high]
    if not crossed:
        return ""
    confidence = (calibration.policy or {}).get("confidence", 0.95)
    return (
        f"The band comes from the stopping rule, not from this interval: at {confidence:.0%} confidence it places "
        f"the pass rate against the zones around each line (floor zone {thresholds.floor_zone[0]:g}–"
        f"{thresholds.floor_zone[1]:g}, retire zone {thresholds.retire_zone[0]:g}–{thresholds.retire_zone[1]:g}), "
        f"where either neighbouring band is acceptable. This interval crosses the "
        + " and ".join(f"{line:g}" for line in crossed)
        + " line."
    )


@policy.page("task_detail")
def task_detail(request, environment_name: str, key: str):
    task = shared.task_for(request, policy.SEE, environment_name, key)
    version = task.current_version
    outcome = request.GET.get("outcome", "")
    # The first rollouts only: each row carries its whole text; the trajectory viewer pages through the rest.
    rollouts = calibration_selectors.task_version_rollouts(
        task_version=version, outcome=outcome, limit=TASK_PAGE_ROLLOUTS
    )
    calibrations = list(version.calibrations.select_related("probe_model")) if version else []
    truncation = calibration_selectors.truncation_by_model(task_version=version) if version else {}
    thresholds = stats.Thresholds.with_default_zones(floor=task.environment.floor, retire_at=task.environment.retire_at)
    for calibration in calibrations:
        calibration.truncation = truncation.get(calibration.probe_model_id)
        calibration.interval_note = _interval_note(calibration, thresholds)
    for rollout in rollouts:
        rollout.completion_tokens = token_count(rollout.completion_token_ids)
    outcome_counts = calibration_selectors.outcome_counts(
        rollouts=version.rollouts.all() if version else Rollout.objects.none()
    )
    return render(
        request,
        "curation/task_detail.html",
        {
            "task": task,
            "version": version,
            "versions": task.versions.order_by("-number"),
            "calibrations": calibrations,
            "truncation_warn_share": settings.PASSBAND_TRUNCATION_WARN_SHARE,
            "rollouts": rollouts,
            "outcome_counts": outcome_counts,
            "rollouts_total": sum(row["count"] for row in outcome_counts if not outcome or row["outcome"] == outcome),
            "status_changes": task.status_changes.select_related("changed_by"),
            "reviews": task.reviews.select_related("reviewer", "task_version"),
            "threads": selectors.comment_threads(task=task),
            "can_comment": policy.task_may_discuss(request.user, task),
            "can_review": task.status in review_services.REVIEWABLE and policy.is_reviewer(request.user),
            "editable_statuses": services.EDITABLE_STATUSES,
            "probe_models": ProbeModel.objects.all(),
            "trajectories_query": urlencode({"environment": task.environment.name, "task": task.key}),
            "outcome": outcome,
            "is_owner": task.owner_id == request.user.pk,
            "similarity_flags": similarity_selectors.version_flags(task_version=version, user=request.user),
            "verifier_page": selectors.task_verifier_page(task_version=version),
            "found_hacks": calibration_selectors.version_found_hacks(task_version_id=version.pk if version else None),
        },
    )


@policy.page("task_upload")
def task_upload(request):
    environments = Environment.objects.all()
    context = {"environments": environments, "report": None, "inline_limit": settings.PASSBAND_IMPORT_INLINE_BYTES}
    if request.method == "POST":
        environment = get_object_or_404(Environment, name=request.POST.get("environment", ""))
        upload = request.FILES.get("file")
        context["selected"] = environment.name
        snapshot_files = request.FILES.getlist("snapshots")
        if upload is None:
            messages.error(request, "Choose a task file (.jsonl, .csv, .parquet or .arrow) to upload.")
        elif (
            snapshot_files and upload.size + sum(f.size for f in snapshot_files) > settings.PASSBAND_IMPORT_INLINE_BYTES
        ):
            try:  # big snapshots: stored, then checked and imported by a worker, as a big task file
                job = import_jobs.import_job_create(
                    environment=environment, owner=request.user, upload=upload, snapshot_uploads=snapshot_files
                )
            except CurationError as error:  # too large, or the storage unavailable
                messages.error(request, str(error))
                return render(request, "curation/task_upload.html", context, status=400)
            return redirect("import_job_detail", job_id=job.pk)
        elif snapshot_files:
            # Repository snapshots with the rows that use them: checked, stored and imported all or nothing.
            try:
                report = repo_uploads.repo_upload(
                    environment=environment,
                    owner=request.user,
                    tasks_filename=upload.name,
                    tasks_data=upload.read(),
                    snapshot_uploads=repo_uploads.uploads_from_files(snapshot_files),
                )
                messages.success(request, report.summary())
            except imports.ImportRejected as rejected:
                report = rejected.report
                messages.error(request, report.summary())
            except files.StorageUnavailable as error:
                messages.error(request, str(error))
                return render(request, "curation/task_upload.html", context, status=503)
            context["report"] = report
        elif too_large := imports.upload_size_problem(filename=upload.name, size=upload.size):
            messages.error(request, too_large)
        elif request.POST.get("action") == "map" or upload.size > settings.PASSBAND_IMPORT_INLINE_BYTES:
            # Someone else's dataset (stored, then mapped on a page of its own), or a file large enough to
            # import in the background.
            mapping = request.POST.get("action") == "map"
            try:
                job = import_jobs.import_job_create(
                    environment=environment, owner=request.user, upload=upload, queue=not mapping
                )
            except files.StorageUnavailable as error:
                messages.error(request, f"{upload.name}: {error}")
                return render(request, "curation/task_upload.html", context, status=503)
            return redirect("import_job_map" if mapping else "import_job_detail", job_id=job.pk)
        else:
            try:
                report = imports.tasks_import(
                    environment=environment, owner=request.user, data=upload.read(), filename=upload.name
                )
                messages.success(request, report.summary())
            except imports.ImportRejected as rejected:
                report = rejected.report
                messages.error(request, report.summary())
            context["report"] = report
        status = 400 if context["report"] is None or not context["report"].ok else 200
        return render(request, "curation/task_upload.html", context, status=status)
    context["selected"] = request.GET.get("environment", "")
    return render(request, "curation/task_upload.html", context)


@policy.page("import_job_detail")
def import_job_detail(request, job_id: int):
    """A background import's progress, then its report; htmx polls the fragment until it ends."""
    job = policy.get_for(request.user, policy.SEE, ImportJob.objects.select_related("environment"), pk=job_id)
    if job.status == ImportJob.Status.MAPPING:
        return redirect("import_job_map", job_id=job.pk)
    report = imports.ImportReport.from_dict(job.report) if job.report else None
    template = "curation/_import_job_progress.html" if request.headers.get("HX-Request") else "curation/import_job.html"
    return render(request, template, {"job": job, "report": report, "selected": job.environment.name})


@policy.page("task_submit")
def task_submit(request, environment_name: str, key: str):
    if request.method != "POST":
        return redirect("task_detail", environment_name=environment_name, key=key)
    task = shared.task_for(request, policy.CHANGE, environment_name, key)
    try:
        services.task_transition(task=task, to_status=TaskStatus.SUBMITTED, by=request.user)
        messages.success(request, f"{task.key} was submitted for review.")
    except ServiceError as error:
        messages.error(request, str(error))
    return redirect("task_detail", environment_name=environment_name, key=key)


def _editor_content(post) -> tuple[dict, list[str]]:
    """Parse the editor form into task fields; JSON fields that do not parse are named."""
    problems = []
    content: dict = {"answer": post.get("answer", "")}
    prompt_text = post.get("prompt", "")
    if post.get("prompt_format") == "messages":
        try:
            content["prompt"] = input_rules.json_text(prompt_text)
        except input_rules.InputError as error:
            problems.append(f"prompt: {error}")
    else:
        content["prompt"] = prompt_text
    for name, default in (("verifier", "{}"), ("tools", "[]"), ("metadata", "{}")):
        raw = post.get(name, "").strip() or default
        try:
            content[name] = input_rules.json_text(raw)
        except input_rules.InputError as error:
            problems.append(f"{name}: {error}")
    if post.get("domain", "").strip():
        content["domain"] = post["domain"].strip()
    if post.get("authoring_cost_usd", "").strip():
        content["authoring_cost_usd"] = post["authoring_cost_usd"].strip()
    if post.get("difficulty", "").strip():
        content["difficulty"] = post["difficulty"].strip()
    if content.get("verifier") == {}:
        content.pop("verifier")
    return content, problems


@policy.page("task_edit")
def task_edit(request, environment_name: str, key: str):
    task = shared.task_for(request, policy.CHANGE, environment_name, key)
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
        "authoring_cost_usd": "" if version.authoring_cost_usd is None else str(version.authoring_cost_usd),
        "difficulty": "" if version.declared_difficulty is None else f"{version.declared_difficulty:g}",
    }
    status = 200
    if request.method == "POST":
        form.update({name: request.POST.get(name, "") for name in form})
        content, problems = _editor_content(request.POST)
        if not problems:
            try:
                new_version = services.task_version_edit(task=task, by=request.user, content=content)
            except ServiceError as error:
                problems = [str(error)]
            else:
                audit = (
                    "passed its audit"
                    if new_version.audit_passed
                    else "FAILED its audit: " + "; ".join(new_version.audit_problems)
                )
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
@policy.page("task_probe")
def task_probe(request, environment_name: str, key: str):
    """Probe now: a campaign over this one task's current version."""
    task = shared.task_for(request, policy.PROBE, environment_name, key)
    probe_model = get_object_or_404(ProbeModel, name=request.POST.get("model", ""))
    try:
        campaign = shared.task_probe_start(request, task, probe_model)
    except (ServiceError, ValueError) as error:
        messages.error(request, f"Could not start the probe: {error}")
        return redirect("task_detail", environment_name=environment_name, key=key)
    messages.success(request, f"Probing {task.key} with {probe_model.name}: campaign {campaign.pk} started.")
    return redirect("campaign_detail", campaign_id=campaign.pk)
