"""Helpers the page views share: the task a user may act on, and links back."""

from django.contrib import messages
from django.core.exceptions import BadRequest
from django.http import Http404
from django.shortcuts import redirect

from accounts.errors import ServiceError
from calibration import services as calibration_services
from calibration.models import Campaign
from curation import policy
from curation.models import Task
from engine import input_rules
from releases import task_filters


def task_for(request, action: str, environment_name: str, key: str) -> Task:
    """The task in the URL if the user may `action` it (curation.policy: 404 unseen, 403 refused)."""
    tasks = Task.objects.select_related("environment", "current_version", "owner")
    return policy.get_for(request.user, action, tasks, environment__name=environment_name, key=key)


def task_filter(params) -> task_filters.TaskFilter:
    """The task list's filter from a query string: 404 for an environment or model that does not
    exist, 400 naming the parameter for a value that is wrong."""
    try:
        return task_filters.task_filter_parse(params)
    except task_filters.TaskFilterError as error:
        raise (Http404 if error.missing else BadRequest)(str(error)) from None


def back(request, task):
    target = request.POST.get("next", "")
    if target.startswith("/review/"):
        return redirect(target)
    return redirect("task_detail", environment_name=task.environment.name, key=task.key)


def query_without(request, *names: str) -> str:
    params = request.GET.copy()
    for name in names:
        params.pop(name, None)
    return params.urlencode()


def page_of(request, items, *, size: int, by_ids: bool = False) -> tuple[list, int, bool]:
    """The `?page=` slice of `items` (1-based): (rows, page number, whether a next page exists).

    Fetches one row more than the page instead of counting the whole set. A page whose rows would start
    beyond what a database offset holds (64 bits) is a 404.
    """
    page = max(int(request.GET["page"]) if request.GET.get("page", "").isdigit() else 1, 1)
    if input_rules.integer_problem(page * size + 1) is not None:
        raise Http404(f"No page {page}.")
    if by_ids:
        rows = rows_by_ids(items, (page - 1) * size, page * size + 1)
    else:
        rows = list(items[(page - 1) * size : page * size + 1])
    return rows[:size], page, len(rows) > size


def rows_by_ids(queryset, start: int, stop: int) -> list:
    """queryset[start:stop], ordered on ids alone (narrow rows sort fast over a long list: a review backlog
    of 33,000 tasks), then those rows read in full. A row gone between the two reads is left out."""
    ids = list(queryset.values_list("pk", flat=True)[start:stop])
    # Their order is the ids' list: the second read sorts nothing.
    found = {row.pk: row for row in queryset.filter(pk__in=ids).order_by()} if ids else {}
    return [found[pk] for pk in ids if pk in found]


def blind_verdict_post(request, item, *, record, done: str, then: str):
    """Record the posted verdict and note on a blind item with `record` (a service); back to the item
    with the service's message when it refuses, else on to the page named `then`."""
    try:
        record(
            item=item, reviewer=request.user, verdict=request.POST.get("verdict", ""), note=request.POST.get("note", "")
        )
    except ServiceError as error:
        messages.error(request, str(error))
        return redirect("blind_review", item_id=item.pk)
    messages.success(request, done)
    return redirect(then)


def task_probe_start(request, task, probe_model) -> Campaign:
    """Probe `task`'s current version with `probe_model`: a campaign of one task, its policy, rollouts and
    max new tokens from the posted form (ValueError for a number that is not one, ServiceError as the service says)."""
    return calibration_services.campaign_start(
        environment=task.environment,
        probe_model=probe_model,
        created_by=request.user,
        policy=request.POST.get("policy", Campaign.Policy.FIXED),
        rollouts=int(request.POST.get("rollouts", "8")),
        max_new_tokens=int(request.POST["max_new_tokens"]) if request.POST.get("max_new_tokens", "").strip() else None,
        task_versions=[task.current_version],
    )
