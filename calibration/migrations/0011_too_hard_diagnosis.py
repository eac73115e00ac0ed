# The too_hard diagnosis (engine/verifiers/diagnosis.py); existing calibrations get theirs from
# `manage.py diagnose_too_hard`.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('calibration', '0010_server_capture'),
    ]

    operations = [
        migrations.AddField(
            model_name='calibration',
            name='diagnosis',
            field=models.CharField(blank=True, choices=[('suspect_verifier', 'suspect verifier'), ('truncated', 'truncated'), ('hard', 'hard')], max_length=20),
        ),
        migrations.AddField(
            model_name='calibration',
            name='diagnosis_evidence',
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.AddIndex(
            model_name='calibration',
            index=models.Index(fields=['diagnosis'], name='calibration_diagnos_1b89d7_idx'),
        ),
    ]
