from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("calibration", "0002_feedback"),
    ]

    operations = [
        migrations.AddField(
            model_name="rollout",
            name="episode",
            field=models.JSONField(blank=True, null=True),
        ),
    ]
