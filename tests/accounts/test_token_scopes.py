"""Token scopes follow roles: nobody mints or uses a scope their role may not hold."""

import hashlib

import pytest
from django.core.cache import cache

from accounts.errors import ServiceError
from accounts.models import ApiToken
from accounts.services import api_token_create
from curation.models import StatusChange, Task, TaskStatus
from tests.conftest import make_user
from tests.factories import import_tasks, math_task

pytestmark = pytest.mark.django_db


@pytest.fixture
def dave(django_user_model):
    """A user in no group."""
    return make_user(django_user_model, "dave")


@pytest.fixture
def active_task(arithmetic, alice):
    import_tasks(arithmetic, alice, math_task("sum"))
    Task.objects.filter(key="sum").update(status=TaskStatus.ACTIVE)
    return Task.objects.get(key="sum")


def feedback(client, secret, passes=64, step=1):
    body = {"task": "sum", "checkpoint": f"ckpt-{step}", "step": step, "attempts": 64, "passes": passes}
    return client.post("/api/v1/feedback", body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {secret}")


@pytest.mark.parametrize(
    "user, allowed",
    [
        ("dave", {"read"}),
        ("alice", {"read", "curate"}),
        ("bob", {"read", "verify", "curate"}),
        ("charlie", {"read", "verify", "export", "feedback"}),
        ("staff", {"read", "verify", "export", "feedback", "curate"}),
    ],
)
def test_each_role_mints_only_its_scopes(request, user, allowed):
    user = request.getfixturevalue(user)
    for scope in ApiToken.SCOPES:
        if scope in allowed:
            assert api_token_create(user=user, name=scope, scopes=[scope])[0].scopes == [scope]
        else:
            with pytest.raises(ServiceError, match=f"may not hold {scope}"):
                api_token_create(user=user, name=scope, scopes=[scope])


def test_a_user_in_no_group_cannot_retire_a_task_even_with_a_forged_token(client, dave, active_task):
    secret = "pb_forged-all-scopes"
    ApiToken.objects.create(
        user=dave,
        name="old",
        prefix=secret[:10],
        scopes=list(ApiToken.SCOPES),
        token_hash=hashlib.sha256(secret.encode()).hexdigest(),
    )
    assert feedback(client, secret).status_code == 403
    active_task.refresh_from_db()
    assert active_task.status == TaskStatus.ACTIVE


def test_a_trainer_moved_out_of_the_group_loses_the_scope_at_once(client, charlie, active_task):
    _, secret = api_token_create(user=charlie, name="trainer", scopes=["feedback"])
    charlie.groups.clear()
    assert feedback(client, secret).status_code == 403


def test_a_retirement_names_the_token_that_caused_it(client, charlie, active_task):
    token, secret = api_token_create(user=charlie, name="grpo-run-7", scopes=["feedback"])
    assert feedback(client, secret).status_code == 201
    change = StatusChange.objects.get(task=active_task, to_status=TaskStatus.RETIRED)
    assert token.prefix in change.reason and "grpo-run-7" in change.reason


def test_feedback_has_its_own_rate_limit_per_token(client, charlie, active_task, settings):
    from rest_framework.settings import api_settings
    from rest_framework.throttling import SimpleRateThrottle

    cache.clear()
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"token": "1000/minute", "feedback": "2/minute"},
    }
    original = SimpleRateThrottle.THROTTLE_RATES
    SimpleRateThrottle.THROTTLE_RATES = api_settings.DEFAULT_THROTTLE_RATES  # DRF reads rates once
    try:
        _, first = api_token_create(user=charlie, name="a", scopes=["feedback", "read"])
        _, second = api_token_create(user=charlie, name="b", scopes=["feedback"])
        codes = [feedback(client, first, passes=10, step=step).status_code for step in range(3)]
        assert codes[:2] != [429, 429] and codes[2] == 429
        assert feedback(client, second, passes=10, step=9).status_code != 429
        # Reading is not held back by the feedback budget.
        read = client.get("/api/v1/tasks", HTTP_AUTHORIZATION=f"Bearer {first}")
        assert read.status_code == 200
    finally:
        SimpleRateThrottle.THROTTLE_RATES = original
        cache.clear()
