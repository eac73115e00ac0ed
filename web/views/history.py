"""History: the audit log (staff), and what changed between two releases."""

from datetime import datetime, time, timedelta

from django.core.exceptions import BadRequest
from django.shortcuts import render
from django.utils import timezone

from accounts import audit
from curation import policy
from releases import selectors as release_selectors
from releases.models import Release
from web.views import shared

AUDIT_FILTERS = ("kind", "object", "action", "actor", "since", "until")


def _day(params, name: str) -> datetime | None:
    """The day in query parameter `name` (YYYY-MM-DD) at midnight; 400 naming the parameter when malformed."""
    raw = params.get(name, "").strip()
    if not raw:
        return None
    try:
        day = datetime.strptime(raw, "%Y-%m-%d").date()
    except ValueError:
        raise BadRequest(f"{name}: expected a date as YYYY-MM-DD, got {raw!r}.") from None
    return timezone.make_aware(datetime.combine(day, time.min))


@policy.page("audit_log")
def audit_log(request):
    """Staff: who did what and when, newest first, filtered by object, action, person and days."""
    params = request.GET
    object_id = params.get("object", "").strip()
    if object_id and not object_id.isdigit():
        raise BadRequest(f"object: expected an id (a number), got {object_id!r}.")
    until = _day(params, "until")
    events = audit.audit_events(
        kind=params.get("kind", "").strip(),
        object_id=int(object_id) if object_id else None,
        action=params.get("action", "").strip(),
        actor=params.get("actor", "").strip(),
        since=_day(params, "since"),
        until=until + timedelta(days=1) if until else None,
    )
    rows, page, has_next = shared.page_of(request, events, size=100)
    context = {
        "events": rows,
        "page": page,
        "has_next": has_next,
        "filters": {name: params.get(name, "") for name in AUDIT_FILTERS},
        "actions": audit.audit_actions(),
        "query": shared.query_without(request, "page"),
    }
    return render(request, "accounts/audit_log.html", context)


def diff_of(request, release_id: int) -> release_selectors.ReleaseDiff:
    """The diff of the release in the URL against the one in `?against=` (both must be visible: else 404)."""
    releases = Release.objects.all()
    new = policy.get_for(request.user, policy.SEE, releases, pk=release_id)
    against = request.GET.get("against", "").strip()
    if not against.isdigit():
        raise BadRequest("against: give the id of the release to compare with, as ?against=<id>.")
    old = policy.get_for(request.user, policy.SEE, releases, pk=int(against))
    return release_selectors.release_diff(old=old, new=new)


@policy.page("release_diff")
def release_diff(request, release_id: int):
    """Tasks added, removed and changed (version or band) from release `against` to this one."""
    context = {
        "diff": diff_of(request, release_id),
        "releases": release_selectors.releases_visible_to(request.user).order_by("-pk")[:50],
    }
    return render(request, "releases/release_diff.html", context)
