"""One status change for every task matching the task list's filter: submit (authors), or a review
decision (reviewers). The filter travels in the query string, so "all matching" means what the list
showed."""

from urllib.parse import urlencode

from django.contrib import messages
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from accounts.errors import ServiceError
from curation import policy
from releases import task_filters
from review import services as review_services
from web.views import shared

DONE = {"submit": "submitted for review", "approve": "approved", "reject": "rejected", "send_back": "sent back"}


def filtered_tasks(request):
    """The tasks the task list shows for the filter in the query string."""
    return task_filters.tasks_matching(user=request.user, task_filter=shared.task_filter(request.GET))


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
    query = {name: request.GET[name] for name in task_filters.PARAMS if request.GET.get(name)}
    return redirect(reverse("task_list") + ("?" + urlencode(query) if query else ""))
