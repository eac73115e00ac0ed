"""Probe an environment: all its tasks, a random sample, or the tasks matching the task list's
filter. The first POST shows what the probe covers, costs and takes (and any campaign already
probing the same environment with the same model); the confirming POST starts it."""

import secrets
from urllib.parse import urlencode

from django.contrib import messages
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from accounts.errors import ServiceError
from calibration import selectors, services
from calibration.models import Campaign, ProbeModel
from curation import policy
from curation.models import Environment, TaskVersion
from releases import selectors as release_selectors

# The task list's filters that a probe of "the tasks matching this filter" carries.
FILTER_FIELDS = ("band", "diagnosis", "status", "q", "flag", "mine")


def _int(post, name: str, default: int | None) -> int | None:
    value = post.get(name, "").strip()
    return int(value) if value else default


@require_POST
@policy.page("environment_probe")
def environment_probe(request, environment_name: str):
    environment = policy.get_for(request.user, policy.PROBE, Environment.objects.all(), name=environment_name)
    probe_model = get_object_or_404(ProbeModel, name=request.POST.get("model", ""))
    back = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        back = "/"
    try:
        fields = _probe_fields(request.POST, environment=environment, probe_model=probe_model)
    except ValueError as error:
        messages.error(request, f"Could not start the probe: {error}")
        return redirect(back)
    scope, sample_size = fields["scope"], fields["sample_size"]
    if scope not in selectors.SCOPES or (scope == "sample" and sample_size < 1):
        messages.error(request, "Choose all tasks, a sample of at least one task, or the current filter.")
        return redirect(back)
    if fields["sample_seed"] is None:
        fields["sample_seed"] = secrets.randbits(31)
    filters = {name: request.POST.get(name, "") for name in FILTER_FIELDS}
    version_ids = selectors.probe_task_versions(
        environment=environment,
        scope=scope,
        sample_size=sample_size,
        sample_seed=fields["sample_seed"],
        user=request.user,
        probe_model=probe_model,
        filters=filters,
    )
    if request.POST.get("confirm") != "1":
        return _probe_confirm(
            request,
            environment=environment,
            probe_model=probe_model,
            version_ids=version_ids,
            fields=fields,
            filters=filters,
            back=back,
        )
    try:
        campaign = services.campaign_start(
            environment=environment,
            probe_model=probe_model,
            created_by=request.user,
            policy=fields["policy"],
            rollouts=fields["rollouts"],
            max_new_tokens=fields["max_new_tokens"],
            task_versions=list(TaskVersion.objects.filter(pk__in=version_ids)) if scope != "all" else None,
        )
    except ServiceError as error:
        messages.error(request, f"Could not start the probe: {error}")
        return redirect(back)
    messages.success(request, f"Probing {environment.name} with {probe_model.name}: campaign {campaign.pk} started.")
    return redirect("campaign_detail", campaign_id=campaign.pk)


def _probe_fields(post, *, environment, probe_model) -> dict:
    """The probe form's settings; raises ValueError for a number that is not one."""
    return {
        "policy": post.get("policy", Campaign.Policy.FIXED),
        "rollouts": _int(post, "rollouts", 8),
        "max_new_tokens": _int(post, "max_new_tokens", None)
        or environment.max_new_tokens
        or probe_model.max_new_tokens,
        "scope": post.get("scope", "all"),
        "sample_size": _int(post, "sample_size", 0) or 0,
        "sample_seed": _int(post, "sample_seed", None),
    }


def _probe_confirm(request, *, environment, probe_model, version_ids, fields: dict, filters: dict, back: str):
    """The confirmation page: how many tasks, the cost estimate, the probes already running."""
    rollouts, max_new_tokens = fields["rollouts"], fields["max_new_tokens"]
    return render(
        request,
        "calibration/probe_confirm.html",
        {
            "environment": environment,
            "probe_model": probe_model,
            "tasks": len(version_ids),
            "estimate": selectors.probe_estimate(
                probe_model=probe_model,
                tasks=len(version_ids),
                rollouts=rollouts,
                max_new_tokens=max_new_tokens,
                policy=fields["policy"],
                environment=environment,
                task_versions=version_ids,
            ),
            "running": selectors.probes_running(environment=environment, probe_model=probe_model),
            "fields": {"model": probe_model.name, **fields, "next": back, **filters},
            "scope": fields["scope"],
            "policy": fields["policy"],
            "rollouts": rollouts,
            "max_new_tokens": max_new_tokens,
        },
    )


@require_POST
@policy.page("checkpoint_reprofile")
def checkpoint_reprofile(request, environment_name: str):
    """Re-profile the environment (or the tasks of the release picked) for a new checkpoint: probe a sample
    first; once that is done, the re-profile predicts the sure bands and probes only the uncertain tasks by
    itself (pressing the button again takes that step at once if it has not run yet). A release the user
    may not see is a 404, as in the API."""
    environment = policy.get_for(request.user, policy.PROBE, Environment.objects.all(), name=environment_name)
    probe_model = get_object_or_404(ProbeModel, name=request.POST.get("model", ""))
    back = f"{reverse('dashboard')}?{urlencode({'environment': environment.name, 'model': probe_model.name})}"
    release = request.POST.get("release", "").strip()
    try:
        release_id = int(release) if release else None
    except ValueError:
        raise Http404("No such release.") from None
    try:
        task_versions = (
            None
            if release_id is None
            else release_selectors.release_environment_versions(
                user=request.user, release_id=release_id, environment=environment
            )
        )
        result = services.checkpoint_reprofile(
            environment=environment,
            probe_model=probe_model,
            created_by=request.user,
            task_versions=task_versions,
            release_id=release_id,
        )
    except ServiceError as error:
        messages.error(request, f"Could not re-profile: {error}")
        return redirect(back)
    if result.stage == "sample":
        messages.success(
            request,
            f"Campaign {result.campaign.pk} probes a sample of {result.probed} tasks with {probe_model.name}; "
            "when it is done, the re-profile predicts the sure bands and probes the rest by itself.",
        )
    else:
        probing = f"campaign {result.campaign.pk} probes them" if result.campaign else "none to probe"
        messages.success(
            request,
            f"{result.predicted} of {result.tasks} bands predicted for {probe_model.name}; "
            f"{result.probed} uncertain ({probing}).",
        )
    return redirect(back)
