"""Roles (Django groups: authors, reviewers, leads, trainers) and the API token scopes each may hold.

Leads are reviewers who also share out the review queue, adjudicate disagreements and add gold
items (docs/review.md): every check for the reviewers role passes for a lead too (SENIOR_ROLES).

Who may see and change each object, and each route's gate, is curation.policy.
"""

AUTHORS, REVIEWERS, TRAINERS, LEADS = "authors", "reviewers", "trainers", "leads"
ROLES = (AUTHORS, REVIEWERS, LEADS, TRAINERS)
# A role whose members hold another one as well: a lead is a reviewer.
SENIOR_ROLES: dict[str, tuple[str, ...]] = {REVIEWERS: (LEADS,)}

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


def _with_seniors(groups: tuple[str, ...]) -> set[str]:
    return set(groups).union(*(SENIOR_ROLES.get(group, ()) for group in groups))


# Where a user object keeps its group names once read: a page asks several role questions of the same
# request.user, and each used to be a query. Dropped whenever that user's groups change (accounts.apps).
GROUP_NAMES_ATTRIBUTE = "_passband_group_names"


def group_names(user) -> frozenset[str]:
    """The names of `user`'s groups, read once per user object (so once per request)."""
    names = getattr(user, GROUP_NAMES_ATTRIBUTE, None)
    if names is None:
        names = frozenset(user.groups.values_list("name", flat=True))
        setattr(user, GROUP_NAMES_ATTRIBUTE, names)
    return names


def forget_group_names(user) -> None:
    user.__dict__.pop(GROUP_NAMES_ATTRIBUTE, None)


def in_group(user, *groups: str) -> bool:
    """Staff, or a member of one of `groups` (or of a role senior to one of them: a lead is a reviewer)."""
    return user.is_authenticated and (user.is_staff or not group_names(user).isdisjoint(_with_seniors(groups)))


def scopes_allowed(user) -> list[str]:
    """The API token scopes this user may hold, in SCOPE_ROLES order."""
    if not user.is_authenticated or not user.is_active:
        return []
    if user.is_staff:
        return list(SCOPE_ROLES)
    groups = group_names(user)
    return [scope for scope, roles in SCOPE_ROLES.items() if roles is None or groups.intersection(_with_seniors(roles))]
