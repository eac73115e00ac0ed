from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from django.contrib.auth import get_user_model
        from django.db.models.signals import m2m_changed

        from accounts.permissions import forget_group_names

        def groups_changed(sender, instance, action, **kwargs):
            # user.groups.add/remove/clear: that user object reads its groups again. Changes made from the
            # group's side (group.user_set.add) reach other user objects at their next request.
            if action.startswith("post_") and isinstance(instance, get_user_model()):
                forget_group_names(instance)

        m2m_changed.connect(groups_changed, sender=get_user_model().groups.through, weak=False)
        watch_access()


def watch_access() -> None:
    """Who may do what, and the records that hold secrets or identities, go to the audit log on every change
    (accounts.audit_changes): users' flags and groups, permissions, API tokens, OIDC identities."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    from accounts.audit_changes import watch, watch_memberships
    from accounts.models import ApiToken, OidcIdentity

    user_model = get_user_model()
    watch(user_model, exclude=("last_login", "date_joined", "first_name", "last_name"))
    watch(ApiToken, exclude=("last_used_at", "created_at"))
    watch(OidcIdentity)
    watch(Group)
    watch_memberships(
        user_model.groups.through,
        action="role_change",
        owner=user_model,
        names=lambda user: set(user.groups.values_list("name", flat=True)),
    )
    permissions = user_model.user_permissions.through
    watch_memberships(permissions, action="permission_change", owner=user_model, names=codenames)
    watch_memberships(Group.permissions.through, action="group_permission_change", owner=Group, names=codenames)


def codenames(owner) -> set[str]:
    relation = owner.user_permissions if hasattr(owner, "user_permissions") else owner.permissions
    return {f"{app}.{codename}" for app, codename in relation.values_list("content_type__app_label", "codename")}
