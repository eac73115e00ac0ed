"""The environment page's impossible-variant probe: staff (or a task's owner, for one task) start one."""

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect

from calibration import services
from calibration.errors import CalibrationError
from calibration.models import ProbeModel
from curation import policy
from curation.models import Environment, Task


@policy.page("environment_impossible_variants")
def environment_impossible_variants(request, environment_name: str):
    """POST: probe the impossible variants of a sample of the environment's tasks (staff), or of one task
    (`task`: its key; its owner or staff), with the chosen probe model; back to the environment page."""
    environment = get_object_or_404(Environment, name=environment_name)
    key = request.POST.get("task", "").strip()
    task = None
    if key:
        task = policy.get_for(
            request.user, policy.PROBE_VARIANTS, Task.objects.filter(environment=environment), key=key
        )
    else:
        policy.require(request.user, policy.PROBE_VARIANTS, environment)
    probe_model = get_object_or_404(ProbeModel, name=request.POST.get("model", ""))
    try:
        sample = int(request.POST.get("sample") or services.impossible_variants.SAMPLE)
        rollouts = int(request.POST.get("rollouts") or services.impossible_variants.ROLLOUTS)
        probe = services.variant_probe_start(
            environment=environment,
            probe_model=probe_model,
            created_by=request.user,
            sample=sample,
            task=task,
            rollouts=rollouts,
        )
    except (ValueError, CalibrationError) as error:
        messages.error(request, f"Could not start the impossible-variant probe: {error}")
    else:
        messages.success(
            request,
            f"Impossible-variant probe {probe.pk} queued: {len(probe.task_version_ids)} task(s), "
            f"{probe.rollouts} attempt(s) each under {probe_model.name}.",
        )
    return redirect("environment_detail", environment_name=environment.name)
