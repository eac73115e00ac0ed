"""GET /api/v1/tasks: token authentication, filters, and each task with its calibration."""

from datetime import timedelta

import pytest
from django.utils import timezone

from accounts.services import api_token_create, api_token_revoke
from calibration.models import Calibration, ProbeModel
from curation.models import TaskStatus, TaskVersion
from tests.factories import import_tasks, math_task

pytestmark = pytest.mark.django_db
URL = "/api/v1/tasks"


@pytest.fixture
def token(charlie):
    return api_token_create(user=charlie, name="trainer", scopes=["read"])[1]


def get(client, secret=None, **params):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {secret}"} if secret else {}
    return client.get(URL, params, **headers)


def test_missing_and_wrong_tokens_are_refused(client):
    assert get(client).status_code == 401
    assert get(client, "pb_not-a-real-token").status_code == 401


def test_expired_revoked_and_wrong_scope_tokens_are_refused(client, charlie):
    token, secret = api_token_create(user=charlie, name="t", scopes=["read"])
    token.expires_at = timezone.now() - timedelta(seconds=1)
    token.save()
    assert get(client, secret).status_code == 401
    token, secret = api_token_create(user=charlie, name="t", scopes=["read"])
    api_token_revoke(token=token)
    assert get(client, secret).status_code == 401
    _, secret = api_token_create(user=charlie, name="t", scopes=["feedback"])
    assert get(client, secret).status_code == 403


def test_each_row_is_what_the_declared_fields_give(client, token, alice, arithmetic):
    """TaskSerializer builds rows by hand for speed; DRF's own field-by-field output is the reference."""
    from rest_framework import serializers

    from api.views.tasks import TaskSerializer

    import_tasks(arithmetic, alice, math_task("easy"), math_task("costly", question="What is 91 * 17?", answer="1547"))
    arithmetic.tasks.update(status=TaskStatus.APPROVED)
    version = arithmetic.tasks.get(key="costly").current_version
    TaskVersion.objects.filter(pk=version.pk).update(
        authoring_cost_usd="1234.5", metadata={"tags": ["a"]}, declared_difficulty=3.0
    )
    model = ProbeModel.objects.create(name="m", backend="transformers")
    Calibration.objects.create(
        task_version=version,
        probe_model=model,
        attempts=8,
        successes=2,
        pass_rate=0.25,
        interval_low=0.05,
        interval_high=0.6,
        band="in_band",
        grpo_signal=0.4,
        flags=["zero_variance"],
    )
    rows = get(client, token, environment="arithmetic", model="m").json()["results"]
    assert {row["key"] for row in rows} == {"easy", "costly"}
    from releases import task_filters

    task_filter = task_filters.task_filter_parse({"environment": "arithmetic", "model": "m"})
    tasks = task_filters.tasks_matching(user=alice, task_filter=task_filter).order_by("pk")
    serializer = TaskSerializer(context={"probe_model": model})
    for task in tasks:
        assert serializer.to_representation(task) == serializers.Serializer.to_representation(serializer, task)
    costly = next(row for row in rows if row["key"] == "costly")
    assert costly["authoring_cost_usd"] == 1234.5 and costly["calibration"]["flags"] == ["zero_variance"]
    assert costly["difficulty"] == 3.0 and next(row for row in rows if row["key"] == "easy")["difficulty"] is None


def test_token_is_stored_hashed(charlie):
    token, secret = api_token_create(user=charlie, name="t", scopes=["read"])
    assert secret not in (token.token_hash, token.prefix) and len(token.token_hash) == 64


def test_lists_tasks_with_calibration_filtered_by_band(client, token, alice, arithmetic):
    import_tasks(arithmetic, alice, math_task("easy"), math_task("hard", question="What is 91 * 17?", answer="1547"))
    arithmetic.tasks.update(status=TaskStatus.APPROVED)  # trainers see approved, active and retired tasks
    model = ProbeModel.objects.create(name="m", backend="transformers")
    easy = arithmetic.tasks.get(key="easy").current_version
    Calibration.objects.create(
        task_version=easy,
        probe_model=model,
        attempts=8,
        successes=8,
        pass_rate=0.94,
        interval_low=0.7,
        interval_high=1.0,
        band="retire",
        grpo_signal=0.0,
    )
    body = get(client, token, environment="arithmetic").json()
    rows = {row["key"]: row for row in body["results"]}
    assert set(rows) == {"easy", "hard"}
    assert rows["easy"]["calibration"]["band"] == "retire" and rows["easy"]["calibration"]["attempts"] == 8
    assert rows["easy"]["version_hash"] == easy.content_hash
    assert rows["hard"]["calibration"] is None
    body = get(client, token, environment="arithmetic", band="retire").json()
    assert [row["key"] for row in body["results"]] == ["easy"]
    assert get(client, token, band="nonsense").status_code == 400
    assert get(client, token, environment="nowhere").status_code == 404
