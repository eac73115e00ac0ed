"""The audit log: who did what to which object, and when (docs/review.md, "History").

Services record an event as they act (`audit_record`): review decisions and every other task status
change (curation.services.task_transition), fixes, token creation and revocation, release builds,
role changes, claims and adjudications. Changes of who may do what and of secret-bearing records
(users' flags, groups and permissions, tokens, OIDC identities, remote servers, probe models) are
recorded whichever path made them, by accounts.audit_changes. Staff read it on the History page, filtered by object,
action, person and date (`audit_events`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Model, QuerySet

from accounts.models import AuditEvent

LABEL_MAX = 300


def audit_record(
    *,
    actor: AbstractBaseUser | None,
    action: str,
    obj: Model | None = None,
    kind: str = "",
    object_id: int | None = None,
    label: str = "",
    detail: dict[str, Any] | None = None,
) -> AuditEvent:
    """Record that `actor` (None: the system) did `action` to `obj` (or to the object named by
    `kind`, `object_id` and `label`); `detail` holds what changed, as JSON."""
    if obj is not None:
        kind, object_id, label = obj._meta.model_name, obj.pk, label or str(obj)
    return AuditEvent.objects.create(
        actor=actor if actor is not None and actor.is_authenticated else None,
        action=action,
        object_kind=kind,
        object_id=object_id,
        object_label=label[:LABEL_MAX],
        detail=detail or {},
    )


def audit_record_many(events: list[AuditEvent]) -> None:
    """Record many events at once (unsaved AuditEvent rows), for changes made in bulk (band changes)."""
    AuditEvent.objects.bulk_create(events, batch_size=1000)


def audit_events(
    *,
    kind: str = "",
    object_id: int | None = None,
    action: str = "",
    actor: str = "",
    since: datetime | None = None,
    until: datetime | None = None,
) -> QuerySet[AuditEvent]:
    """Events, newest first, narrowed by object kind and id, action, the actor's username and a time range."""
    events = AuditEvent.objects.select_related("actor")
    if kind:
        events = events.filter(object_kind=kind)
    if object_id is not None:
        events = events.filter(object_id=object_id)
    if action:
        events = events.filter(action=action)
    if actor:
        events = events.filter(actor__username=actor)
    if since is not None:
        events = events.filter(at__gte=since)
    if until is not None:
        events = events.filter(at__lt=until)
    return events


def audit_actions() -> list[str]:
    """Every action recorded so far, for the filter's menu."""
    return sorted(AuditEvent.objects.values_list("action", flat=True).distinct())


def roles_change_record(
    *, user: AbstractBaseUser, by: AbstractBaseUser | None, before: set[str], after: set[str]
) -> None:
    """Record a change of `user`'s roles (groups) made by `by`; nothing when they did not change."""
    if before == after:
        return
    audit_record(
        actor=by,
        action="role_change",
        obj=user,
        label=user.get_username(),
        detail={
            "added": sorted(after - before),
            "removed": sorted(before - after),
            "before": sorted(before),
            "after": sorted(after),
        },
    )
