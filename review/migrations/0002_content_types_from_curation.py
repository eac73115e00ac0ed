"""The moved models' content types change app label, curation to review, in place: permissions, admin log
entries and group grants point at a content type by id, so they follow. Reversible."""

from django.db import migrations

MOVED = ("review", "blinditem", "blindreview", "adjudication", "reviewclaim", "reviewerdomain", "notification")


def _relabel(apps, *, source: str, target: str) -> None:
    """Relabel the content types of MOVED from app `source` to app `target`, keeping each row's id.

    A row already under `target` (post_migrate made it when the new app was first seen) is merged into the
    one being relabelled: its permissions and log entries move over, a permission whose codename the kept
    row already has is dropped, then the extra row goes."""
    ContentType = apps.get_model("contenttypes", "ContentType")
    Permission = apps.get_model("auth", "Permission")
    LogEntry = apps.get_model("admin", "LogEntry")
    for model in MOVED:
        kept = ContentType.objects.filter(app_label=source, model=model).first()
        if kept is None:
            continue  # a new database: post_migrate makes the row under the right label later
        extra = ContentType.objects.filter(app_label=target, model=model).first()
        if extra is not None:
            held = Permission.objects.filter(content_type=kept).values_list("codename", flat=True)
            Permission.objects.filter(content_type=extra, codename__in=list(held)).delete()
            Permission.objects.filter(content_type=extra).update(content_type=kept)
            LogEntry.objects.filter(content_type=extra).update(content_type=kept)
            extra.delete()
        kept.app_label = target
        kept.save(update_fields=["app_label"])
    # The content-type cache of this process may still hold the old labels.
    ContentType.objects.clear_cache()
    from django.contrib.contenttypes.models import ContentType as CurrentContentType

    CurrentContentType.objects.clear_cache()


def forward(apps, schema_editor):
    _relabel(apps, source="curation", target="review")


def backward(apps, schema_editor):
    _relabel(apps, source="review", target="curation")


class Migration(migrations.Migration):
    dependencies = [
        ("review", "0001_initial"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("admin", "0003_logentry_add_action_flag_choices"),
    ]

    operations = [migrations.RunPython(forward, backward)]
