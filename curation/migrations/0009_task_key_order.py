import django.db.models
from django.db import migrations

import curation.models
from engine.natural_sort import natural_sort_key


def fill_key_order(apps, schema_editor):
    Task = apps.get_model("curation", "Task")
    batch = []
    for task in Task.objects.only("pk", "key").iterator(chunk_size=2000):
        task.key_order = natural_sort_key(task.key)
        batch.append(task)
        if len(batch) >= 2000:
            Task.objects.bulk_update(batch, ["key_order"])
            batch = []
    Task.objects.bulk_update(batch, ["key_order"])


class Migration(migrations.Migration):
    dependencies = [("curation", "0008_import_mapping")]

    operations = [
        migrations.AddField(
            model_name="task",
            name="key_order",
            field=curation.models.NaturalSortKeyField(
                default="", editable=False, help_text="The key in natural order: /2 before /10.", max_length=800
            ),
        ),
        migrations.RunPython(fill_key_order, migrations.RunPython.noop),
        migrations.AddIndex(
            model_name="task",
            index=django.db.models.Index(fields=["key_order"], name="task_key_order"),
        ),
    ]
