"""Release and ReleaseItem move here from curation: the tables stay, only the state moves."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ("calibration", "0005_probe_model_samples_per_request"),
        ("curation", "0005_tokens_and_releases_move_out"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='Release',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('filter', models.JSONField(default=dict, help_text='The filter the release was made with.')),
                        ('thresholds', models.JSONField(default=dict, help_text='Floor and retirement threshold per environment.')),
                        ('manifest', models.JSONField(blank=True, default=dict, help_text='Counts per band and domain, files and sha256.')),
                        ('status', models.CharField(choices=[('pending', 'Pending'), ('building', 'Building'), ('ready', 'Ready'), ('failed', 'Failed')], default='pending', max_length=20)),
                        ('error', models.TextField(blank=True)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('built_at', models.DateTimeField(blank=True, null=True)),
                        ('created_by', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='releases', to=settings.AUTH_USER_MODEL)),
                        ('environment', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='releases', to='curation.environment')),
                        ('probe_model', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='releases', to='calibration.probemodel')),
                    ],
                    options={
                        'ordering': ['-created_at', '-id'],
                        'db_table': 'curation_release',
                    },
                ),
                migrations.CreateModel(
                    name='ReleaseItem',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('attempts', models.PositiveIntegerField(null=True)),
                        ('successes', models.PositiveIntegerField(null=True)),
                        ('pass_rate', models.FloatField(null=True)),
                        ('interval_low', models.FloatField(null=True)),
                        ('interval_high', models.FloatField(null=True)),
                        ('band', models.CharField(blank=True, max_length=20)),
                        ('grpo_signal', models.FloatField(null=True)),
                        ('release', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='items', to='releases.release')),
                        ('task_version', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='release_items', to='curation.taskversion')),
                    ],
                    options={
                        'ordering': ['release', 'id'],
                        'db_table': 'curation_releaseitem',
                        'constraints': [models.UniqueConstraint(fields=('release', 'task_version'), name='release_item_unique')],
                    },
                ),
            ],
            database_operations=[],
        ),
    ]
