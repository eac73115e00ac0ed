"""Who may do what in the browser. Roles are Django groups: authors, reviewers, trainers."""

from functools import wraps

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied

AUTHORS, REVIEWERS, TRAINERS = "authors", "reviewers", "trainers"

# Which roles may hold each API token scope (staff hold all). Reading is anyone's: a token reads
# only what its user may see. Export and feedback move what trainers train on, and feedback can
# retire tasks: trainers only. Verify runs the verifiers: trainers and reviewers. Curate changes
# task status in bulk (authors submit their own, reviewers decide): authors and reviewers.
SCOPE_ROLES: dict[str, tuple[str, ...] | None] = {
    "read": None,
    "export": (TRAINERS,),
    "feedback": (TRAINERS,),
    "verify": (TRAINERS, REVIEWERS),
    "curate": (AUTHORS, REVIEWERS),
}


def in_group(user, *groups: str) -> bool:
    return user.is_authenticated and (user.is_staff or user.groups.filter(name__in=groups).exists())


def scopes_allowed(user) -> list[str]:
    """The API token scopes this user may hold, in SCOPE_ROLES order."""
    if not user.is_authenticated or not user.is_active:
        return []
    if user.is_staff:
        return list(SCOPE_ROLES)
    groups = set(user.groups.values_list("name", flat=True))
    return [scope for scope, roles in SCOPE_ROLES.items() if roles is None or groups.intersection(roles)]


def group_required(*groups: str):
    """Login required; then staff or a member of one of `groups`, else 403."""

    def decorator(view):
        @login_required
        @wraps(view)
        def wrapper(request, *args, **kwargs):
            if not in_group(request.user, *groups):
                raise PermissionDenied(f"This page is for {' or '.join(groups)}.")
            return view(request, *args, **kwargs)

        return wrapper

    return decorator


def browser_user_required(view):
    """Any signed-in user except trainer-only accounts, who use the API."""

    @login_required
    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if in_group(request.user, AUTHORS, REVIEWERS) or not request.user.groups.filter(name=TRAINERS).exists():
            return view(request, *args, **kwargs)
        raise PermissionDenied("Trainer accounts use the API.")

    return wrapper
