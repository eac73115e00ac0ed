"""Probe an environment: all its tasks, a random sample, or the tasks matching the task list's
filter. The first POST shows what the probe covers, costs and takes (and any campaign already
probing the same environment with the same model); the confirming POST starts it."""

import secrets

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from accounts.errors import ServiceError
from calibration import selectors, services
from calibration.models import Campaign, ProbeModel
from curation import policy
from curation.models import Environment, TaskVersion

FILTER_FIELDS = ("band", "status", "q", "flag", "mine")


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
        rollouts = _int(request.POST, "rollouts", 8)
        max_new_tokens = (
            _int(request.POST, "max_new_tokens", None) or environment.max_new_tokens or probe_model.max_new_tokens
        )
        sampling_policy = request.POST.get("policy", Campaign.Policy.FIXED)
        scope = request.POST.get("scope", "all")
        sample_size = _int(request.POST, "sample_size", 0) or 0
        sample_seed = _int(request.POST, "sample_seed", None)
    except ValueError as error:
        messages.error(request, f"Could not start the probe: {error}")
        return redirect(back)
    if scope not in selectors.SCOPES or (scope == "sample" and sample_size < 1):
        messages.error(request, "Choose all tasks, a sample of at least one task, or the current filter.")
        return redirect(back)
    sample_seed = secrets.randbits(31) if sample_seed is None else sample_seed
    filters = {name: request.POST.get(name, "") for name in FILTER_FIELDS}
    version_ids = selectors.probe_task_versions(
        environment=environment,
        scope=scope,
        sample_size=sample_size,
        sample_seed=sample_seed,
        user=request.user,
        probe_model=probe_model,
        filters=filters,
    )
    if request.POST.get("confirm") != "1":
        return render(
            request,
            "calibration/probe_confirm.html",
            {
                "environment": environment,
                "probe_model": probe_model,
                "tasks": len(version_ids),
                "estimate": selectors.probe_estimate(
                    probe_model=probe_model, tasks=len(version_ids), rollouts=rollouts, max_new_tokens=max_new_tokens
                ),
                "running": selectors.probes_running(environment=environment, probe_model=probe_model),
                "fields": {
                    "model": probe_model.name,
                    "policy": sampling_policy,
                    "rollouts": rollouts,
                    "max_new_tokens": max_new_tokens,
                    "scope": scope,
                    "sample_size": sample_size,
                    "sample_seed": sample_seed,
                    "next": back,
                    **filters,
                },
                "scope": scope,
                "policy": sampling_policy,
                "rollouts": rollouts,
                "max_new_tokens": max_new_tokens,
            },
        )
    try:
        campaign = services.campaign_start(
            environment=environment,
            probe_model=probe_model,
            created_by=request.user,
            policy=sampling_policy,
            rollouts=rollouts,
            max_new_tokens=max_new_tokens,
            task_versions=list(TaskVersion.objects.filter(pk__in=version_ids)) if scope != "all" else None,
        )
    except ServiceError as error:
        messages.error(request, f"Could not start the probe: {error}")
        return redirect(back)
    messages.success(request, f"Probing {environment.name} with {probe_model.name}: campaign {campaign.pk} started.")
    return redirect("campaign_detail", campaign_id=campaign.pk)
