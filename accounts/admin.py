from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin

from accounts.apps import codenames
from accounts.audit import roles_change_record
from accounts.audit_changes import record_membership, recorded_elsewhere
from accounts.models import ApiToken, AuditEvent, OidcIdentity


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("prefix", "name", "user", "scopes", "expires_at", "revoked_at", "last_used_at")
    readonly_fields = ("token_hash", "prefix")


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    list_display = ("at", "actor", "action", "object_kind", "object_label")
    list_filter = ("action", "object_kind")

    def has_change_permission(self, request, obj=None) -> bool:
        return False  # the audit log is read-only

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


User = get_user_model()
admin.site.unregister(User)


@admin.register(User)
class AuditedUserAdmin(UserAdmin):
    """Django's user admin. Its flags are recorded by accounts.audit_changes like any change; a form's change
    of groups (removals, then additions) is one role_change event with who made it, and of permissions one
    permission_change event."""

    def save_related(self, request, form, formsets, change):
        user = form.instance
        before_roles = set(user.groups.values_list("name", flat=True)) if change else set()
        before_permissions = codenames(user) if change else set()
        with recorded_elsewhere():
            super().save_related(request, form, formsets, change)
        roles_change_record(
            user=user, by=request.user, before=before_roles, after=set(user.groups.values_list("name", flat=True))
        )
        record_membership(action="permission_change", obj=user, before=before_permissions, after=codenames(user))


@admin.register(OidcIdentity)
class OidcIdentityAdmin(admin.ModelAdmin):
    """Where an admin links an existing account to an organisation identity (issuer and subject), the one
    step besides the owner's own (the tokens page) that links an account; recorded in the audit log."""

    list_display = ("user", "issuer", "subject", "last_login_at")
    search_fields = ("user__username", "subject", "issuer")
    raw_id_fields = ("user",)
