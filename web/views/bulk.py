"""One status change for every task matching the task list's filter: submit (authors), or a review
decision (reviewers). The filter travels in the query string, so "all matching" means what the list
showed."""

from urllib.parse import urlencode

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from accounts.errors import ServiceError
from calibration import selectors as calibration_selectors
from calibration.models import ProbeModel
from curation import policy, review_services
from curation.models import Environment

LIST_FILTERS = ("environment", "model", "band", "status", "flag", "mine", "q", "sort")
DONE = {"submit": "submitted for review", "approve": "approved", "reject": "rejected", "send_back": "sent back"}


def filtered_tasks(request):
    """The tasks the task list shows for the filter in the query string."""
    params = request.GET
    environment = get_object_or_404(Environment, name=params["environment"]) if params.get("environment") else None
    probe_model = get_object_or_404(ProbeModel, name=params["model"]) if params.get("model") else None
    probe_model = probe_model or calibration_selectors.default_probe_model(environment)
    return calibration_selectors.tasks_with_calibration(
        user=request.user,
        environment=environment,
        probe_model=probe_model,
        band=params.get("band", ""),
        status=params.get("status", ""),
        search=params.get("q", "").strip(),
        owner=request.user if params.get("mine") else None,
        flag=params.get("flag", ""),
    )


@require_POST
@policy.page("task_bulk")
def task_bulk(request):
    action = request.POST.get("action", "")
    try:
        result = review_services.tasks_bulk_action(
            tasks=filtered_tasks(request), user=request.user, action=action, comment=request.POST.get("comment", "")
        )
    except ServiceError as error:
        messages.error(request, str(error))
    else:
        messages.success(request, f"{len(result.decided)} task(s) {DONE[action]}; {len(result.skipped)} skipped.")
        for line in result.skipped[:20]:
            messages.warning(request, line)
        if len(result.skipped) > 20:
            messages.warning(request, f"… and {len(result.skipped) - 20} more skipped.")
    query = {name: request.GET[name] for name in LIST_FILTERS if request.GET.get(name)}
    return redirect(reverse("task_list") + ("?" + urlencode(query) if query else ""))
