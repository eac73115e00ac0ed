from django.contrib import admin

from review.models import Review


@admin.register(Review)
class ReviewAdmin(admin.ModelAdmin):
    list_display = ("task", "decision", "reviewer", "created_at")
    list_filter = ("decision",)
    raw_id_fields = ("task", "task_version")
