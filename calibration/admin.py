from django.contrib import admin

from calibration.models import Calibration, Campaign, ProbeModel, Reprofile


@admin.register(ProbeModel)
class ProbeModelAdmin(admin.ModelAdmin):
    list_display = ("name", "backend", "model", "base_url", "temperature", "max_new_tokens")
    # Where a model is reached and with which key change only through the service
    # (calibration.services.probe_models), which holds them to the outbound policy.
    readonly_fields = ("base_url", "api_key_env")


@admin.register(Campaign)
class CampaignAdmin(admin.ModelAdmin):
    list_display = ("pk", "environment", "probe_model", "policy", "status", "created_at")
    list_filter = ("status", "policy")


@admin.register(Calibration)
class CalibrationAdmin(admin.ModelAdmin):
    list_display = ("task_version", "probe_model", "attempts", "successes", "pass_rate", "band")
    list_filter = ("band", "probe_model")


@admin.register(Reprofile)
class ReprofileAdmin(admin.ModelAdmin):
    list_display = ("pk", "environment", "probe_model", "stage", "tasks", "predicted", "probed", "error", "created_at")
    list_filter = ("stage",)
