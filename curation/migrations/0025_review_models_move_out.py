"""Review, BlindItem, BlindReview, Adjudication, ReviewClaim, ReviewerDomain and Notification move to the
review app (review/migrations/0001_initial.py): the tables stay, the state moves."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("curation", "0024_task_version_weak_tests"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveField(
                    model_name="blinditem",
                    name="task_version",
                ),
                migrations.RemoveField(
                    model_name="blindreview",
                    name="item",
                ),
                migrations.RemoveField(
                    model_name="blindreview",
                    name="reviewer",
                ),
                migrations.RemoveField(
                    model_name="notification",
                    name="actor",
                ),
                migrations.RemoveField(
                    model_name="notification",
                    name="comment",
                ),
                migrations.RemoveField(
                    model_name="notification",
                    name="recipient",
                ),
                migrations.RemoveField(
                    model_name="notification",
                    name="task",
                ),
                migrations.RemoveField(
                    model_name="review",
                    name="reviewer",
                ),
                migrations.RemoveField(
                    model_name="review",
                    name="task",
                ),
                migrations.RemoveField(
                    model_name="review",
                    name="task_version",
                ),
                migrations.RemoveField(
                    model_name="reviewclaim",
                    name="assigned_by",
                ),
                migrations.RemoveField(
                    model_name="reviewclaim",
                    name="reviewer",
                ),
                migrations.RemoveField(
                    model_name="reviewclaim",
                    name="task",
                ),
                migrations.RemoveField(
                    model_name="reviewerdomain",
                    name="reviewer",
                ),
                migrations.DeleteModel(
                    name="Adjudication",
                ),
                migrations.DeleteModel(
                    name="BlindItem",
                ),
                migrations.DeleteModel(
                    name="BlindReview",
                ),
                migrations.DeleteModel(
                    name="Notification",
                ),
                migrations.DeleteModel(
                    name="Review",
                ),
                migrations.DeleteModel(
                    name="ReviewClaim",
                ),
                migrations.DeleteModel(
                    name="ReviewerDomain",
                ),
            ],
            database_operations=[],
        ),
    ]
