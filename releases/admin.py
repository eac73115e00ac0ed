from django.contrib import admin

from releases.models import Release


@admin.register(Release)
class ReleaseAdmin(admin.ModelAdmin):
    list_display = ("pk", "status", "created_by", "created_at")

    def has_change_permission(self, request, obj=None):
        return False  # releases are immutable
