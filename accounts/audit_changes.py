"""Changes of who may do what, and of secret-bearing records, recorded whichever path made them.

`watch(Model)` records every create, change and delete of the model's watched fields in the audit log
(accounts.audit) with the actor, the time, and the fields' values before and after: through `save()`
and `delete()` (Django's signals, with the old row read before the save) and through `QuerySet.update()`
and `bulk_update()`, which send no signal (the model's managers are given a queryset that records them).
`watch_memberships(through, ...)` records many-to-many changes (a user's groups and permissions) from
either side through `m2m_changed`.

Who acted comes from the request being served (`AuditRequestMiddleware`: the signed-in user or the API
token's user), `acting_as()` (a service acting for someone), or no one (the system: a command, a worker).
Each event says by which path: admin, api, page or system. A service that records a richer event of
its own for the same change runs its write inside `recorded_elsewhere()`.

Values of secret-bearing fields (a password or token hash, a secret, an encrypted value) are never
written out: the event says "(changed)".
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from django.db import models
from django.db.models.signals import m2m_changed, post_delete, post_save, pre_delete, pre_save

from accounts.audit import audit_record

_request: ContextVar[Any] = ContextVar("audit_request", default=None)
_actor: ContextVar[Any] = ContextVar("audit_actor", default=None)
_silenced: ContextVar[bool] = ContextVar("audit_silenced", default=False)

SECRET_NAME = re.compile(r"(password|secret|hash|encrypted|private|_key$|^key$)", re.IGNORECASE)
HIDDEN = "(changed)"


class AuditRequestMiddleware:
    """Makes the request being served the source of the actor for the changes it causes."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        token = _request.set(request)
        try:
            return self.get_response(request)
        finally:
            _request.reset(token)


@contextlib.contextmanager
def acting_as(user) -> Iterator[None]:
    """Changes made inside are recorded as `user`'s (None: whoever the request says)."""
    token = _actor.set(user)
    try:
        yield
    finally:
        _actor.reset(token)


@contextlib.contextmanager
def recorded_elsewhere() -> Iterator[None]:
    """Changes made inside are recorded by the caller, in an event of its own."""
    token = _silenced.set(True)
    try:
        yield
    finally:
        _silenced.reset(token)


def current_actor():
    if _actor.get() is not None:
        return _actor.get()
    user = getattr(_request.get(), "user", None)
    return user if user is not None and user.is_authenticated else None


def current_path() -> str:
    """admin, api or page for a request; system for a command, a worker or a migration."""
    request = _request.get()
    if request is None:
        return "system"
    return "admin" if request.path.startswith("/admin/") else "api" if request.path.startswith("/api/") else "page"


def shown(field: models.Field, value: Any) -> Any:
    """A JSON-safe value of `field` for the log (never a secret's value)."""
    if SECRET_NAME.search(field.name) or "encrypt" in type(field).__name__.lower():
        return HIDDEN if value not in (None, "") else value
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    return value


def record(*, action: str, obj: models.Model, before: dict | None, after: dict | None) -> None:
    if _silenced.get():
        return
    detail = {"before": before, "after": after, "via": current_path()}
    audit_record(
        actor=current_actor(), action=action, obj=obj, detail={k: v for k, v in detail.items() if v is not None}
    )


class _Watch:
    def __init__(self, model: type[models.Model], exclude: Iterable[str]):
        self.model, self.name = model, model._meta.model_name
        self.fields = [
            field
            for field in model._meta.concrete_fields
            if not field.primary_key and field.name not in set(exclude) and not getattr(field, "auto_now", False)
        ]
        self.by_name = {field.name: field for field in self.fields}

    def values(self, obj: models.Model) -> dict[str, Any]:
        """The watched fields' values as Python reads them (compare these; `shown` them for the log)."""
        return {field.name: _normal(field, getattr(obj, field.attname)) for field in self.fields}

    def rows(self, pks: Iterable[int]) -> dict[int, dict[str, Any]]:
        names = [field.attname for field in self.fields]
        found = self.model._base_manager.filter(pk__in=list(pks)).values("pk", *names)
        return {row["pk"]: {field.name: _normal(field, row[field.attname]) for field in self.fields} for row in found}

    def shown(self, values: dict[str, Any]) -> dict[str, Any]:
        return {name: shown(self.by_name[name], value) for name, value in values.items()}

    def changed(self, obj: models.Model, before: dict, after: dict) -> None:
        names = [name for name in after if before.get(name) != after[name]]
        if names:
            record(
                action=f"{self.name}_change",
                obj=obj,
                before=self.shown({name: before.get(name) for name in names}),
                after=self.shown({name: after[name] for name in names}),
            )

    def touches(self, names: Iterable[str] | None) -> bool:
        watched = {field.name for field in self.fields} | {field.attname for field in self.fields}
        return names is None or not watched.isdisjoint(names)


def _normal(field: models.Field, value: Any) -> Any:
    try:
        return field.to_python(value)
    except Exception:  # a value the field cannot read back is compared as it is
        return value


def watch(model: type[models.Model], *, exclude: Iterable[str] = ()) -> None:
    """Record every create, change and delete of `model`'s concrete fields but `exclude` (and auto_now
    stamps), through save(), delete(), QuerySet.update() and bulk_update()."""
    watched = _Watch(model, exclude)
    key = f"audit-{watched.name}"

    def before_save(sender, instance, raw=False, update_fields=None, **kwargs):
        if raw or _silenced.get() or instance._state.adding or not watched.touches(update_fields):
            instance.__dict__.pop("_audit_before", None)
            return
        instance._audit_before = watched.rows([instance.pk]).get(instance.pk)

    def after_save(sender, instance, created, raw=False, **kwargs):
        if raw:
            return
        if created:
            record(
                action=f"{watched.name}_create",
                obj=instance,
                before=None,
                after=watched.shown(watched.values(instance)),
            )
            return
        before = instance.__dict__.pop("_audit_before", None)
        if before is not None:
            watched.changed(instance, before, watched.values(instance))

    def before_delete(sender, instance, **kwargs):
        instance._audit_before = watched.rows([instance.pk]).get(instance.pk) or watched.values(instance)

    def after_delete(sender, instance, **kwargs):
        before = instance.__dict__.pop("_audit_before", None) or watched.values(instance)
        record(action=f"{watched.name}_delete", obj=instance, before=watched.shown(before), after=None)

    pre_save.connect(before_save, sender=model, weak=False, dispatch_uid=key)
    post_save.connect(after_save, sender=model, weak=False, dispatch_uid=key)
    pre_delete.connect(before_delete, sender=model, weak=False, dispatch_uid=key)
    post_delete.connect(after_delete, sender=model, weak=False, dispatch_uid=key)
    for manager in model._meta.managers:
        _record_bulk_writes(manager, watched)


def _record_bulk_writes(manager: models.Manager, watched: _Watch) -> None:
    """Give `manager` (and the related managers Django builds from its class) a queryset whose update()
    and bulk_update() record what they change."""
    if getattr(manager, "_audit_watched", None) is not None:
        return
    queryset_class = manager._queryset_class

    class RecordingQuerySet(queryset_class):
        def update(self, **changes):
            if _silenced.get() or not watched.touches(changes):
                return super().update(**changes)
            pks = list(self.values_list("pk", flat=True))
            return _recorded(watched, pks, lambda: super(RecordingQuerySet, self).update(**changes))

        def bulk_update(self, objs, fields, batch_size=None):
            if _silenced.get() or not watched.touches(fields):
                return super().bulk_update(objs, fields, batch_size=batch_size)
            pks = [obj.pk for obj in objs]
            return _recorded(watched, pks, lambda: super(RecordingQuerySet, self).bulk_update(objs, fields, batch_size))

    base = type(manager)
    # Same name, module and equality as the declared class: migrations deconstruct and compare managers by them.
    namespace = {
        "_queryset_class": RecordingQuerySet,
        "__module__": base.__module__,
        "__qualname__": base.__qualname__,
        "__eq__": lambda self, other: isinstance(other, base) and self._constructor_args == other._constructor_args,
        "__hash__": base.__hash__,
    }
    manager.__class__ = type(base.__name__, (base,), namespace)
    manager._audit_watched = watched


def _recorded(watched: _Watch, pks: list, write: Callable[[], Any]) -> Any:
    before = watched.rows(pks)
    result = write()
    after = watched.rows(pks)
    objects = watched.model._base_manager.in_bulk(list(after))
    for pk, values in after.items():
        if pk in before and pk in objects:
            watched.changed(objects[pk], before[pk], values)
    return result


def watch_memberships(
    through: type[models.Model], *, action: str, owner: type[models.Model], names: Callable[[Any], set[str]]
) -> None:
    """Record changes of a many-to-many relation (`through`) of `owner` objects, made from either side,
    as `action` with the owner's `names(owner)` before and after, and what was added and removed."""

    def changed(sender, instance, action: str, reverse: bool, model, pk_set, **kwargs):
        if _silenced.get():
            return
        step, verb = action.split("_", 1)
        if step == "pre":
            owners = [instance] if isinstance(instance, owner) else _owners_of(owner, instance, verb, pk_set)
            instance._audit_memberships = [(person, names(person)) for person in owners]
            return
        for person, before in instance.__dict__.pop("_audit_memberships", []):
            record_membership(action=action_name, obj=person, before=before, after=names(person))

    action_name = action
    m2m_changed.connect(changed, sender=through, weak=False, dispatch_uid=f"audit-{action}-{through.__name__}")


def _owners_of(owner, other, verb: str, pk_set) -> list:
    if verb == "clear" or pk_set is None:
        field = next(f for f in owner._meta.many_to_many if f.remote_field.model is type(other))
        return list(owner._base_manager.filter(**{field.name: other}))
    return list(owner._base_manager.filter(pk__in=pk_set))


def record_membership(*, action: str, obj: models.Model, before: set[str], after: set[str]) -> None:
    """Record a change of `obj`'s memberships (roles, permissions): added, removed, before and after."""
    if _silenced.get() or before == after:
        return
    detail = {
        "added": sorted(after - before),
        "removed": sorted(before - after),
        "before": sorted(before),
        "after": sorted(after),
        "via": current_path(),
    }
    audit_record(actor=current_actor(), action=action, obj=obj, label=str(obj), detail=detail)
