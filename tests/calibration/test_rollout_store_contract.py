"""The rollout store behaves the same on PostgreSQL and the embedded SQLite: this file runs in both
passes of `make test` (it is in SQLITE_TESTS), and every assertion is about what the store returns
and what the rows then hold, never about which path ran."""

from decimal import Decimal

import pytest
from django.utils import timezone

from calibration.models import Campaign, Outcome, ProbeModel, Rollout
from calibration.services.rollout_store import rollouts_insert, verdicts_save
from engine.packing import pack_logprobs, pack_tokens
from tests.factories import import_tasks, math_task

pytestmark = pytest.mark.django_db


@pytest.fixture
def campaign(alice, arithmetic):
    import_tasks(arithmetic, alice, math_task("t-1"))
    probe_model = ProbeModel.objects.create(name="probe", backend="openai", base_url="http://127.0.0.1:9/v1")
    return Campaign.objects.create(environment=arithmetic, probe_model=probe_model, created_by=alice, seed=1)


def row(campaign, index: int, **changes) -> dict:
    version = campaign.environment.tasks.get(key="t-1").current_version
    return {
        "campaign_id": campaign.pk,
        "task_version_id": version.pk,
        "probe_model_id": campaign.probe_model_id,
        "sample_index": index,
        "seed": 1000 + index,
        "prompt_token_ids": pack_tokens([1, 2, 3]),
        "completion_token_ids": pack_tokens([4, 5 + index]),
        "logprobs": pack_logprobs([-0.5, -0.25]),
        "text": f"answer {index}",
        "finish_reason": "stop",
        "truncated": False,
        "capture": "exact",
        "logprob_source": "pre_sampling",
        "prompt_ids_source": "model",
        "sampling": {"temperature": 1.0, "seed": 1000 + index},
        "generation_error": "",
        "input_tokens": 3,
        "output_tokens": 2,
        "generation_ms": 12.5,
        "device_ms": 12.5,
        "outcome": None,
        "detail": "",
        "cost_usd": Decimal("0.00012345"),
        "episode": None,
        **changes,
    }


def test_insert_counts_only_new_rows_and_stores_them_whole(campaign):
    assert rollouts_insert([]) == 0
    assert rollouts_insert([row(campaign, 0), row(campaign, 1)]) == 2
    # A retried job: the two stored samples are skipped, the new one counts.
    retried = [row(campaign, 0, text="other"), row(campaign, 1), row(campaign, 2, episode={"turns": [1, 2]})]
    assert rollouts_insert(retried) == 1
    assert rollouts_insert(retried) == 0
    stored = {rollout.sample_index: rollout for rollout in Rollout.objects.filter(campaign=campaign)}
    assert sorted(stored) == [0, 1, 2]
    first = stored[0]
    assert first.text == "answer 0"  # the first write wins
    assert bytes(first.prompt_token_ids) == pack_tokens([1, 2, 3])
    assert bytes(first.logprobs) == pack_logprobs([-0.5, -0.25])
    assert first.sampling == {"temperature": 1.0, "seed": 1000}
    assert first.episode is None and stored[2].episode == {"turns": [1, 2]}
    assert first.cost_usd == Decimal("0.00012345")
    assert first.outcome is None and first.created_at is not None


def test_a_generation_error_is_stored_as_its_outcome(campaign):
    assert rollouts_insert([row(campaign, 0, outcome=Outcome.GENERATION_ERROR, detail="generation failed: x")]) == 1
    assert Rollout.objects.get().outcome == Outcome.GENERATION_ERROR


def test_verdicts_never_overwrite_a_verdict_already_stored(campaign):
    rollouts_insert([row(campaign, 0), row(campaign, 1)])
    first, second = Rollout.objects.filter(campaign=campaign).order_by("sample_index")
    at = timezone.now()
    verdicts_save([(first.pk, Outcome.PASS, 1.0, "ok", 3.0)], verified_at=at)
    # A duplicate job verifies both again with other verdicts: only the unverified one changes.
    verdicts_save(
        [(first.pk, Outcome.FAIL, 0.0, "late", 4.0), (second.pk, Outcome.ERROR, None, "boom", 5.0)], verified_at=at
    )
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.outcome, first.reward, first.detail, first.verify_ms) == (Outcome.PASS, 1.0, "ok", 3.0)
    assert (second.outcome, second.reward, second.detail, second.verify_ms) == (Outcome.ERROR, None, "boom", 5.0)
    assert first.verified_at == at and second.verified_at == at
    verdicts_save([], verified_at=at)
