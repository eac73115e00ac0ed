from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin

from accounts.audit import roles_change_record
from accounts.models import ApiToken, AuditEvent


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
    """Django's user admin; a change of roles (groups) is recorded in the audit log with who made it."""

    def save_related(self, request, form, formsets, change):
        user = form.instance
        before = set(user.groups.values_list("name", flat=True)) if change else set()
        super().save_related(request, form, formsets, change)
        roles_change_record(
            user=user, by=request.user, before=before, after=set(user.groups.values_list("name", flat=True))
        )
