"""Truncated rollouts are counted per campaign and task, warned about, and the budget is settable."""

import pytest
from django.urls import reverse

from calibration import selectors, services
from calibration.models import Rollout
from curation.services import environment_update
from tests.factories import import_tasks
from tests.support.openai_server import serve_openai

pytestmark = pytest.mark.django_db

ANSWER = "The answer is 42, as asked."  # 27 tokens: one byte a token in the fake server


@pytest.fixture
def model():
    with serve_openai(respond=lambda prompt, seed: ANSWER) as base_url:
        yield services.probe_model_add(
            name="fake", backend="openai", base_url=base_url, model="fake-model", max_new_tokens=256
        )


def probe(environment, user, model, **kwargs):
    campaign = services.campaign_start(
        environment=environment, probe_model=model, created_by=user, rollouts=4, round_size=4, enqueue=False, **kwargs
    )
    return services.campaign_run_inline(campaign=campaign)


def test_environment_default_budget_truncates_and_the_campaign_warns(client, arithmetic, alice, model):
    import_tasks(
        arithmetic,
        alice,
        {"key": "a", "prompt": "Say 42", "answer": "42", "verifier": {"kind": "regex", "pattern": "42"}},
    )
    environment_update(environment=arithmetic, max_new_tokens=16)
    campaign = probe(arithmetic, alice, model)
    assert campaign.max_new_tokens == 16
    assert set(
        Rollout.objects.filter(campaign=campaign).values_list("truncated", "finish_reason", "sampling__max_new_tokens")
    ) == {(True, "length", 16)}
    progress = selectors.campaign_progress(campaign=campaign)
    assert progress["truncated"] == 4 and progress["truncated_share"] == 1.0 and progress["truncation_warning"]
    client.force_login(alice)
    page = client.get(reverse("campaign_detail", args=[campaign.pk])).content.decode()
    assert "Warning:" in page and "100.0% of rollouts (4) stopped at the 16-token limit" in page
    task_page = client.get(reverse("task_detail", args=["arithmetic", "a"])).content.decode()
    assert 'class="warning"' in task_page and "(4/4)" in task_page


def test_a_campaign_budget_overrides_the_defaults_and_no_warning_without_truncation(client, arithmetic, alice, model):
    import_tasks(
        arithmetic,
        alice,
        {"key": "a", "prompt": "Say 42", "answer": "42", "verifier": {"kind": "regex", "pattern": "42"}},
    )
    environment_update(environment=arithmetic, max_new_tokens=16)
    campaign = probe(arithmetic, alice, model, max_new_tokens=64)
    assert campaign.max_new_tokens == 64 and not Rollout.objects.filter(campaign=campaign, truncated=True).exists()
    progress = selectors.campaign_progress(campaign=campaign)
    assert progress["truncated_share"] == 0 and not progress["truncation_warning"]
    client.force_login(alice)
    page = client.get(reverse("campaign_detail", args=[campaign.pk])).content.decode()
    assert "Warning:" not in page and "0.0% of rollouts (0)" in page
