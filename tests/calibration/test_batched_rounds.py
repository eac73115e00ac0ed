"""Rounds of many task versions in one job: the same rollouts and calibrations as one job per task."""

from datetime import timedelta
from unittest import mock

import pytest
from django.utils import timezone

from calibration import services
from calibration.models import Calibration, Campaign, CampaignItem, ProbeModel, Rollout
from tests.factories import import_tasks
from tests.support.openai_server import serve_openai

TASKS = 12


def word_tasks(count: int, **extra) -> list[dict]:
    # The fake server says words like "the", "answer", "42": some tasks pass sometimes, some never.
    answers = ["42", "the", "zebra"]
    return [
        {
            "key": f"w-{i}",
            "prompt": f"Say a word ({i}).",
            "answer": answers[i % 3],
            "verifier": {"kind": "regex", "pattern": r"\b" + answers[i % 3] + r"\b", "mode": "search"},
            **extra,
        }
        for i in range(count)
    ]


@pytest.fixture
def server_url():
    with serve_openai(eos_probability=0.5) as base_url:
        yield base_url


def openai_model(base_url: str, name: str = "fake", **options) -> ProbeModel:
    return services.probe_model_add(
        name=name, backend="openai", base_url=base_url, model="fake-model", max_new_tokens=24, **options
    )


def two_round_campaign(environment, owner, base_url: str, *, tasks: int) -> Campaign:
    """`tasks` word tasks and a fixed campaign of two rounds of 4 over them, not queued."""
    import_tasks(environment, owner, *word_tasks(tasks))
    return services.campaign_start(
        environment=environment,
        probe_model=openai_model(base_url),
        created_by=owner,
        rollouts=8,
        round_size=4,
        seed=2,
        enqueue=False,
    )


def run_in_batches(campaign: Campaign, size: int) -> None:
    """What the workers do, with `size` task versions per job: generate, verify, advance, repeat."""
    pending = list(
        CampaignItem.objects.filter(campaign=campaign)
        .order_by("task_version_id")
        .values_list("task_version_id", flat=True)
    )
    jobs = [(pending[start : start + size], 0) for start in range(0, len(pending), size)]
    while jobs:
        version_ids, round_index = jobs.pop(0)
        services.rollouts_generate(campaign_id=campaign.pk, task_version_ids=version_ids, round_index=round_index)
        services.rollouts_verify(campaign_id=campaign.pk, task_version_ids=version_ids)
        opened = services.campaign_items_advance(
            campaign_id=campaign.pk, task_version_ids=version_ids, round_index=round_index
        )
        if opened:
            jobs.append((opened, round_index + 1))


def snapshot(campaign: Campaign) -> tuple[list, list]:
    rollouts = [
        (r.task_version_id, r.sample_index, r.seed, bytes(r.completion_token_ids), r.outcome, r.reward)
        for r in Rollout.objects.filter(campaign=campaign).order_by("task_version_id", "sample_index")
    ]
    calibrations = [
        (c.task_version_id, c.attempts, c.successes, c.band, c.pass_rate, c.interval_low, c.interval_high, c.decided)
        for c in Calibration.objects.filter(probe_model=campaign.probe_model).order_by("task_version_id")
    ]
    return rollouts, calibrations


@pytest.mark.django_db
@pytest.mark.parametrize("samples_per_request", [1, 4])
def test_batched_adaptive_campaign_matches_one_task_at_a_time(arithmetic, alice, server_url, samples_per_request):
    import_tasks(arithmetic, alice, *word_tasks(TASKS))
    results = []
    for name, size in (("alone", 1), ("batched", 5)):
        model = openai_model(server_url, name=name, samples_per_request=samples_per_request)
        campaign = services.campaign_start(
            environment=arithmetic,
            probe_model=model,
            created_by=alice,
            policy=Campaign.Policy.ADAPTIVE,
            rollouts=24,
            round_size=4,
            seed=9,
            enqueue=False,
        )
        run_in_batches(campaign, size)
        campaign.refresh_from_db()
        assert campaign.status == Campaign.Status.DONE
        results.append(snapshot(campaign))
    (alone_rollouts, alone_calibrations), (batched_rollouts, batched_calibrations) = results
    assert batched_rollouts == alone_rollouts
    assert batched_calibrations == alone_calibrations
    # The adaptive policy stopped tasks at different rounds, so batches shrank as tasks were decided.
    per_task = {}
    for version_id, *_ in batched_rollouts:
        per_task[version_id] = per_task.get(version_id, 0) + 1
    assert len(per_task) == TASKS and len(set(per_task.values())) > 1


@pytest.mark.django_db
def test_a_batched_job_run_twice_stores_and_advances_nothing_more(arithmetic, alice, server_url):
    campaign = two_round_campaign(arithmetic, alice, server_url, tasks=6)
    ids = list(CampaignItem.objects.filter(campaign=campaign).values_list("task_version_id", flat=True))
    assert services.rollouts_generate(campaign_id=campaign.pk, task_version_ids=ids, round_index=0) == 24
    assert services.rollouts_generate(campaign_id=campaign.pk, task_version_ids=ids, round_index=0) == 0
    assert services.rollouts_verify(campaign_id=campaign.pk, task_version_ids=ids) == 24
    assert services.rollouts_verify(campaign_id=campaign.pk, task_version_ids=ids) == 0
    assert services.campaign_items_advance(campaign_id=campaign.pk, task_version_ids=ids, round_index=0) == sorted(ids)
    # A duplicate of the same job finds the items moved on: it opens nothing.
    assert services.campaign_items_advance(campaign_id=campaign.pk, task_version_ids=ids, round_index=0) == []
    assert set(CampaignItem.objects.filter(campaign=campaign).values_list("round", flat=True)) == {1}


@pytest.mark.django_db
def test_a_batch_samples_only_the_items_still_open_at_its_round(arithmetic, alice, server_url):
    campaign = two_round_campaign(arithmetic, alice, server_url, tasks=4)
    first, second, third, fourth = CampaignItem.objects.filter(campaign=campaign).order_by("task_version_id")
    CampaignItem.objects.filter(pk=second.pk).update(done=True)
    CampaignItem.objects.filter(pk=third.pk).update(round=1)
    ids = [item.task_version_id for item in (first, second, third, fourth)]
    assert services.rollouts_generate(campaign_id=campaign.pk, task_version_ids=ids, round_index=0) == 8
    stored = set(Rollout.objects.filter(campaign=campaign).values_list("task_version_id", flat=True))
    assert stored == {first.task_version_id, fourth.task_version_id}
    # A round that is incomplete for some versions opens the next round only for the complete ones.
    services.rollouts_verify(campaign_id=campaign.pk, task_version_ids=ids)
    Rollout.objects.filter(task_version_id=fourth.task_version_id, sample_index=3).delete()
    opened = services.campaign_items_advance(campaign_id=campaign.pk, task_version_ids=ids, round_index=0)
    assert opened == [first.task_version_id]


@pytest.mark.django_db
def test_jobs_batch_server_rounds_with_cheap_verifiers_only(
    arithmetic, alice, server_url, settings, django_capture_on_commit_callbacks
):
    settings.PASSBAND_TASKS_PER_JOB = 5
    import_tasks(arithmetic, alice, *word_tasks(12))
    import_tasks(
        arithmetic,
        alice,
        *[
            {
                "key": f"code-{i}",
                "prompt": f"Write f ({i}).",
                "answer": "",
                "verifier": {"kind": "code", "style": "asserts", "asserts": ["assert f() == 1"]},
            }
            for i in range(2)
        ],
    )
    server = openai_model(server_url)
    in_process = services.probe_model_add(name="local", backend="transformers")
    for model, expected in ((server, [5, 5, 2, 1, 1]), (in_process, [1] * 14)):
        campaign = services.campaign_start(environment=arithmetic, probe_model=model, created_by=alice, enqueue=False)
        with (
            mock.patch("calibration.tasks.generate_rollouts.delay") as delay,
            django_capture_on_commit_callbacks(execute=True),
        ):
            assert services.campaign_enqueue_pending(campaign_id=campaign.pk) == 14
        assert sorted((len(call.args[1]) for call in delay.call_args_list), reverse=True) == expected
        queued = [version_id for call in delay.call_args_list for version_id in call.args[1]]
        assert sorted(queued) == sorted(
            CampaignItem.objects.filter(campaign=campaign).values_list("task_version_id", flat=True)
        )


@pytest.mark.django_db
def test_calibrations_refresh_in_bulk_matches_one_at_a_time(arithmetic, alice, server_url):
    import_tasks(arithmetic, alice, *word_tasks(6))
    model = openai_model(server_url)
    campaign = services.campaign_start(
        environment=arithmetic, probe_model=model, created_by=alice, rollouts=6, round_size=6, seed=4, enqueue=False
    )
    services.campaign_run_inline(campaign=campaign)
    versions = [
        item.task_version
        for item in CampaignItem.objects.filter(campaign=campaign).select_related("task_version__task__environment")
    ]
    one_by_one = {
        version.pk: services.calibration_refresh(task_version=version, probe_model=model) for version in versions
    }
    Calibration.objects.filter(probe_model=model).update(band="undecided", attempts=0, successes=0)
    together = services.calibrations_refresh(task_versions=versions, probe_model=model)
    fields = (
        "attempts",
        "successes",
        "band",
        "pass_rate",
        "interval_low",
        "interval_high",
        "grpo_signal",
        "cost_usd",
        "flags",
        "policy",
    )
    for version in versions:
        stored = Calibration.objects.get(task_version=version, probe_model=model)
        assert together[version.pk].pk == stored.pk == one_by_one[version.pk].pk
        assert [getattr(stored, field) for field in fields] == [
            getattr(one_by_one[version.pk], field) for field in fields
        ]
    assert Calibration.objects.filter(probe_model=model).count() == len(versions)


@pytest.mark.django_db
def test_reconcile_requeues_rounds_whose_lease_ran_out_only(arithmetic, alice, server_url, settings):
    settings.PASSBAND_STALLED_AFTER = 60
    import_tasks(arithmetic, alice, *word_tasks(4))
    campaign = services.campaign_start(
        environment=arithmetic, probe_model=openai_model(server_url), created_by=alice, enqueue=False
    )
    items = list(CampaignItem.objects.filter(campaign=campaign).order_by("task_version_id"))
    # Two rounds whose worker stopped renewing its lease, one a worker still holds, one done.
    an_hour_ago = timezone.now() - timedelta(hours=1)
    CampaignItem.objects.filter(campaign=campaign).update(queued_at=an_hour_ago)
    CampaignItem.objects.filter(pk__in=[items[0].pk, items[1].pk]).update(lease_expires_at=an_hour_ago)
    CampaignItem.objects.filter(pk=items[2].pk).update(lease_expires_at=timezone.now() + timedelta(minutes=1))
    CampaignItem.objects.filter(pk=items[3].pk).update(done=True, lease_expires_at=an_hour_ago)
    with mock.patch("calibration.tasks.generate_rollouts.delay") as delay:
        assert services.campaigns_reconcile() == 2
    [call] = delay.call_args_list
    assert call.args == (campaign.pk, [items[0].task_version_id, items[1].task_version_id], 0)
    # The stall is on record for the campaign page (and counted on /metrics).
    campaign.refresh_from_db()
    assert campaign.stalled_rounds == 2 and campaign.last_stall_at is not None
    with mock.patch("calibration.tasks.generate_rollouts.delay"):
        assert services.campaigns_reconcile() == 0  # re-queued once: not stalled again while item 2 is held
    campaign.refresh_from_db()
    assert campaign.stalled_rounds == 2


@pytest.mark.django_db
def test_reconcile_finishes_a_campaign_whose_items_are_all_done(arithmetic, alice, server_url):
    campaign = two_round_campaign(arithmetic, alice, server_url, tasks=3)
    items = CampaignItem.objects.filter(campaign=campaign)
    items.exclude(pk=items.first().pk).update(done=True)
    assert not services.campaign_finish_if_done(campaign_id=campaign.pk)
    items.update(done=True)  # e.g. two jobs closed the last items at the same moment
    with mock.patch("calibration.tasks.generate_rollouts.delay") as delay:
        assert services.campaigns_reconcile(stalled_for_seconds=0) == 0
    delay.assert_not_called()
    campaign.refresh_from_db()
    assert campaign.status == Campaign.Status.DONE and campaign.finished_at is not None
