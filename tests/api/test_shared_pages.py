"""API task pages kept for a few seconds (PASSBAND_API_PAGE_SECONDS): served again only to the same user and
URL, saying how old they are, refreshed on request, and never past the checks on who asks."""

import pytest
from django.core.cache import cache

from accounts.services import api_token_create, api_token_revoke
from curation.models import TaskStatus
from tests.factories import import_tasks, math_task

pytestmark = pytest.mark.django_db
URL = "/api/v1/tasks"


@pytest.fixture(autouse=True)
def kept_pages(settings):
    settings.PASSBAND_API_PAGE_SECONDS = 60
    cache.clear()
    yield
    cache.clear()


def get(client, secret, **headers):
    return client.get(URL, {"environment": "arithmetic"}, HTTP_AUTHORIZATION=f"Bearer {secret}", **headers)


def statuses(response) -> dict[str, str]:
    return {row["key"]: row["status"] for row in response.json()["results"]}


def test_a_kept_page_says_its_age_and_no_cache_reads_the_database(client, charlie, alice, arithmetic):
    import_tasks(arithmetic, alice, math_task("easy"), math_task("other", question="What is 3 + 4?", answer="7"))
    arithmetic.tasks.update(status=TaskStatus.APPROVED)
    _, secret = api_token_create(user=charlie, name="loader", scopes=["read"])
    first = get(client, secret)
    assert first.status_code == 200 and first["Age"] == "0"
    assert first["Cache-Control"] == "private, max-age=60"
    assert statuses(first) == {"easy": "approved", "other": "approved"}

    arithmetic.tasks.filter(key="easy").update(status=TaskStatus.RETIRED)
    kept = get(client, secret)
    assert statuses(kept) == {"easy": "approved", "other": "approved"}  # up to 60 s old, as its headers say
    assert kept.content == first.content and int(kept["Age"]) >= 0

    fresh = get(client, secret, HTTP_CACHE_CONTROL="no-cache")
    assert statuses(fresh) == {"easy": "retired", "other": "approved"}
    assert statuses(get(client, secret)) == {"easy": "retired", "other": "approved"}  # the fresh page is kept


def test_another_user_never_gets_a_page_kept_for_someone_else(client, charlie, alice, arithmetic):
    import_tasks(arithmetic, alice, math_task("easy"), math_task("draft", question="What is 3 + 4?", answer="7"))
    arithmetic.tasks.filter(key="easy").update(status=TaskStatus.APPROVED)  # "draft" stays alice's own
    _, trainer = api_token_create(user=charlie, name="loader", scopes=["read"])
    _, author = api_token_create(user=alice, name="mine", scopes=["read"])
    assert set(statuses(get(client, trainer))) == {"easy"}
    assert set(statuses(get(client, author))) == {"easy", "draft"}
    assert set(statuses(get(client, trainer))) == {"easy"}


def test_a_kept_page_is_not_served_past_a_revoked_token_or_a_wrong_scope(client, charlie, alice, arithmetic):
    import_tasks(arithmetic, alice, math_task("easy"))
    arithmetic.tasks.update(status=TaskStatus.APPROVED)
    token, secret = api_token_create(user=charlie, name="loader", scopes=["read"])
    assert get(client, secret).status_code == 200
    api_token_revoke(token=token)
    assert get(client, secret).status_code == 401
    _, feedback_only = api_token_create(user=charlie, name="reports", scopes=["feedback"])
    assert get(client, feedback_only).status_code == 403


def test_pages_are_not_kept_by_default(client, charlie, alice, arithmetic, settings):
    settings.PASSBAND_API_PAGE_SECONDS = 0
    import_tasks(arithmetic, alice, math_task("easy"))
    arithmetic.tasks.update(status=TaskStatus.APPROVED)
    _, secret = api_token_create(user=charlie, name="loader", scopes=["read"])
    first = get(client, secret)
    assert "Age" not in first
    arithmetic.tasks.update(status=TaskStatus.RETIRED)
    assert statuses(get(client, secret)) == {"easy": "retired"}
