"""The review app's models, as curation made them: state only, on curation's tables (db_table), which
curation/migrations/0003_review.py, 0011, 0014, 0015 and 0016 created."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('curation', '0025_review_models_move_out'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='BlindItem',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('kind', models.CharField(choices=[('judged_rollout', 'Judged Rollout'), ('double_review', 'Double Review'), ('gold_task', 'Gold Task')], max_length=40)),
                        ('object_id', models.PositiveBigIntegerField()),
                        ('content', models.TextField(help_text='What people judge: the completion, copied when sampled.')),
                        ('decided_by', models.CharField(help_text="Whose decision is checked: the judge's name.", max_length=80)),
                        ('decided_version', models.CharField(blank=True, help_text="The judge's prompt version.", max_length=40)),
                        ('decision', models.CharField(max_length=20)),
                        ('decided_note', models.TextField(blank=True)),
                        ('decided_defect', models.CharField(blank=True, help_text="A first reviewer's defect tag.", max_length=30)),
                        ('reviews_wanted', models.PositiveSmallIntegerField(default=1)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('task_version', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='blind_items', to='curation.taskversion')),
                    ],
                    options={
                        'db_table': 'curation_blinditem',
                        'ordering': ['created_at', 'id'],
                    },
                ),
                migrations.CreateModel(
                    name='Adjudication',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('decision', models.CharField(choices=[('pass', 'Pass'), ('fail', 'Fail')], max_length=20)),
                        ('comment', models.TextField(blank=True)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('lead', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                        ('item', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='adjudication', to='review.blinditem')),
                    ],
                    options={
                        'db_table': 'curation_adjudication',
                    },
                ),
                migrations.CreateModel(
                    name='BlindReview',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('verdict', models.CharField(choices=[('pass', 'Pass'), ('fail', 'Fail')], max_length=20)),
                        ('note', models.TextField(blank=True)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('item', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='reviews', to='review.blinditem')),
                        ('reviewer', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='blind_reviews', to=settings.AUTH_USER_MODEL)),
                    ],
                    options={
                        'db_table': 'curation_blindreview',
                        'ordering': ['created_at', 'id'],
                    },
                ),
                migrations.CreateModel(
                    name='Notification',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('kind', models.CharField(choices=[('mention', 'Mention')], default='mention', max_length=20)),
                        ('read_at', models.DateTimeField(blank=True, null=True)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('actor', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to=settings.AUTH_USER_MODEL)),
                        ('comment', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='curation.comment')),
                        ('recipient', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='notifications', to=settings.AUTH_USER_MODEL)),
                        ('task', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='curation.task')),
                    ],
                    options={
                        'db_table': 'curation_notification',
                        'ordering': ['-created_at', '-id'],
                    },
                ),
                migrations.CreateModel(
                    name='Review',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('decision', models.CharField(choices=[('approve', 'Approve'), ('reject', 'Reject'), ('send_back', 'Send Back'), ('fix', 'Fix')], max_length=20)),
                        ('defect', models.CharField(blank=True, choices=[('wrong_answer', 'Wrong Answer'), ('ambiguous_prompt', 'Ambiguous Prompt'), ('gameable_verifier', 'Gameable Verifier'), ('duplicate', 'Duplicate'), ('leaked_benchmark', 'Leaked Benchmark'), ('other', 'Other')], max_length=30)),
                        ('comment', models.TextField(blank=True)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('reviewer', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='reviews', to=settings.AUTH_USER_MODEL)),
                        ('task', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='reviews', to='curation.task')),
                        ('task_version', models.ForeignKey(null=True, on_delete=django.db.models.deletion.PROTECT, related_name='reviews', to='curation.taskversion')),
                    ],
                    options={
                        'db_table': 'curation_review',
                        'ordering': ['-created_at', '-id'],
                    },
                ),
                migrations.CreateModel(
                    name='ReviewClaim',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('how', models.CharField(choices=[('claimed', 'Claimed'), ('round_robin', 'Round Robin'), ('domain', 'Domain'), ('reassigned', 'Reassigned')], default='claimed', max_length=20)),
                        ('claimed_at', models.DateTimeField()),
                        ('expires_at', models.DateTimeField()),
                        ('assigned_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                        ('reviewer', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='review_claims', to=settings.AUTH_USER_MODEL)),
                        ('task', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='review_claim', to='curation.task')),
                    ],
                    options={
                        'db_table': 'curation_reviewclaim',
                    },
                ),
                migrations.CreateModel(
                    name='ReviewerDomain',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('domain', models.CharField(max_length=40)),
                        ('reviewer', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='review_domains', to=settings.AUTH_USER_MODEL)),
                    ],
                    options={
                        'db_table': 'curation_reviewerdomain',
                        'ordering': ['domain', 'reviewer'],
                    },
                ),
                migrations.AddIndex(
                    model_name='blinditem',
                    index=models.Index(fields=['kind', 'decided_by', 'decided_version'], name='blind_item_decider'),
                ),
                migrations.AddConstraint(
                    model_name='blinditem',
                    constraint=models.UniqueConstraint(fields=('kind', 'object_id'), name='blind_item_unique_object'),
                ),
                migrations.AddConstraint(
                    model_name='blindreview',
                    constraint=models.UniqueConstraint(fields=('item', 'reviewer'), name='blind_review_once_per_reviewer'),
                ),
                migrations.AddIndex(
                    model_name='notification',
                    index=models.Index(fields=['recipient', 'read_at'], name='notification_unread'),
                ),
                migrations.AddConstraint(
                    model_name='notification',
                    constraint=models.UniqueConstraint(fields=('recipient', 'comment', 'kind'), name='notification_once_per_comment'),
                ),
                migrations.AddIndex(
                    model_name='review',
                    index=models.Index(fields=['reviewer', 'created_at'], name='curation_re_reviewe_4a5e9e_idx'),
                ),
                migrations.AddIndex(
                    model_name='reviewclaim',
                    index=models.Index(fields=['reviewer', 'expires_at'], name='review_claim_holder'),
                ),
                migrations.AddConstraint(
                    model_name='reviewerdomain',
                    constraint=models.UniqueConstraint(fields=('reviewer', 'domain'), name='reviewer_domain_once'),
                ),
            ],
            database_operations=[],
        ),
    ]
