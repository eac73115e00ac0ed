from django.contrib import admin

from accounts.models import ApiToken


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("prefix", "name", "user", "scopes", "expires_at", "revoked_at", "last_used_at")
    readonly_fields = ("token_hash", "prefix")
