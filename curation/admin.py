from django.contrib import admin

from curation.models import Comment, Environment, StatusChange, Task, TaskVersion


@admin.register(Environment)
class EnvironmentAdmin(admin.ModelAdmin):
    list_display = ("name", "domain", "floor", "retire_at", "created_at")


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):
    list_display = ("key", "environment", "owner", "status", "updated_at")
    list_filter = ("environment", "status")
    search_fields = ("key",)
    raw_id_fields = ("current_version",)


@admin.register(TaskVersion)
class TaskVersionAdmin(admin.ModelAdmin):
    list_display = ("task", "number", "domain", "audit_passed", "created_at")
    readonly_fields = [field.name for field in TaskVersion._meta.fields]

    def has_change_permission(self, request, obj=None):
        return False  # versions are immutable


@admin.register(StatusChange)
class StatusChangeAdmin(admin.ModelAdmin):
    list_display = ("task", "from_status", "to_status", "changed_by", "changed_at")


@admin.register(Comment)
class CommentAdmin(admin.ModelAdmin):
    list_display = ("task", "author", "parent", "resolved_at", "created_at")
    raw_id_fields = ("task", "parent")
