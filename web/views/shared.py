"""Helpers the page views share: the task a user may see or change, and links back."""

from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, redirect

from curation import selectors


def visible_task(request, environment_name: str, key: str):
    return get_object_or_404(
        selectors.tasks_visible_to(request.user).select_related("environment", "current_version", "owner"),
        environment__name=environment_name,
        key=key,
    )


def owned_task(request, environment_name: str, key: str):
    """The task if the user may see it; 403 when they may see but not change it."""
    task = visible_task(request, environment_name, key)
    if task.owner_id != request.user.pk and not request.user.is_staff:
        raise PermissionDenied("Only the task's author can change it.")
    return task


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


def page_of(request, items, *, size: int) -> tuple[list, int, bool]:
    """The `?page=` slice of `items` (1-based): (rows, page number, whether a next page exists).

    Fetches one row more than the page instead of counting the whole set.
    """
    page = max(int(request.GET["page"]) if request.GET.get("page", "").isdigit() else 1, 1)
    rows = list(items[(page - 1) * size : page * size + 1])
    return rows[:size], page, len(rows) > size
