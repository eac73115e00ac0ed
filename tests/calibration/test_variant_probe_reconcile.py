"""A lost impossible-variant probe job is queued again by beat and completes the probe, storing nothing twice
(calibration/services/variant_leases.py): a worker killed mid-probe (SIGKILL, its lease runs out) and a message
dropped from the broker before any worker took it. The probe model is a scripted policy speaking the OpenAI
protocol that answers every sum with its true value (which every variant fails)."""

import re
import threading
from datetime import timedelta

import pytest
from django.db.models import Count
from django.utils import timezone

from calibration import services
from calibration.models import ImpossibleVariant, VariantProbe, VariantRollout
from calibration.services.variant_leases import variant_probe_leased, variant_probes_reconcile
from curation.services import environment_create
from tests.factories import import_tasks
from tests.support.openai_server import OpenAITestServer
from tests.support.workers import flush_broker, running_worker, start_worker, stop_worker, wait_for

ROLLOUTS = 2
SUMS = ((6, 2), (7, 5), (9, 4), (3, 3))
FIRST = "What is 6 + 2?"
_SUM = re.compile(r"What is (\d+) \+ (\d+)\?")
# A short lease, renewed every second, and a beat that looks every second for what stalled.
LEASE = {"PASSBAND_ROUND_LEASE_S": "3"}
RECOVERY = {**LEASE, "PASSBAND_RECONCILE_EVERY": "1", "PASSBAND_STALLED_AFTER": "4"}


def honest(prompt_text: str, seed: int) -> str:
    found = _SUM.search(prompt_text)
    return f"The answer is {int(found[1]) + int(found[2])}."


def sums_environment(owner, name="sums"):
    environment = environment_create(name=name, domain="math")
    rows = [
        {"key": f"sum-{a}-{b}", "prompt": f"What is {a} + {b}?", "answer": str(a + b), "verifier": {"kind": "numeric"}}
        for a, b in SUMS
    ]
    assert import_tasks(environment, owner, *rows).ok
    return environment


def probe_of(environment, staff, server, *, enqueue: bool = True) -> VariantProbe:
    model = services.probe_model_add(name="honest", backend="openai", base_url=server.base_url, model="fake")
    return services.variant_probe_start(
        environment=environment, probe_model=model, created_by=staff, rollouts=ROLLOUTS, seed=3, enqueue=enqueue
    )


def assert_complete_once(probe: VariantProbe) -> None:
    """Done, every variant ready with exactly ROLLOUTS attempts, one per sample index."""
    probe.refresh_from_db()
    assert probe.status == VariantProbe.Status.DONE, probe.error
    variants = ImpossibleVariant.objects.filter(probe=probe)
    assert variants.count() == len(SUMS) and set(variants.values_list("status", flat=True)) == {"ready"}
    per_variant = (
        VariantRollout.objects.filter(variant__probe=probe)
        .values("variant")
        .annotate(n=Count("id"), distinct=Count("sample_index", distinct=True))
    )
    assert sorted((row["n"], row["distinct"]) for row in per_variant) == [(ROLLOUTS, ROLLOUTS)] * len(SUMS)
    assert set(VariantRollout.objects.filter(variant__probe=probe).values_list("outcome", flat=True)) == {"fail"}


def requests_for(server, question: str) -> int:
    return sum(question in str(request.body) for request in server.requests if request.path.endswith("completions"))


@pytest.mark.django_db
def test_reconcile_queues_a_stalled_probe_once_and_leaves_one_at_work(alice, staff):
    environment = sums_environment(alice)
    with OpenAITestServer(respond=honest) as server:
        probe = probe_of(environment, staff, server, enqueue=False)
    long_ago = timezone.now() - timedelta(seconds=600)
    # Queued long ago, never taken, while nothing else is at work: its message was lost; queued again once.
    VariantProbe.objects.filter(pk=probe.pk).update(queued_at=long_ago)
    assert variant_probes_reconcile(stalled_for_seconds=60) == 1
    assert variant_probes_reconcile(stalled_for_seconds=60) == 0  # the first call's re-queue is recent
    # A live lease is a worker at it, however long ago the message went: left alone; a second message is dropped.
    VariantProbe.objects.filter(pk=probe.pk).update(queued_at=long_ago)
    with variant_probe_leased(probe_id=probe.pk) as held:
        assert held
        assert variant_probes_reconcile(stalled_for_seconds=60) == 0
        with variant_probe_leased(probe_id=probe.pk) as second:
            assert not second
    # A lease that ran out (its worker died): queued again, and the lease cleared by that claim.
    VariantProbe.objects.filter(pk=probe.pk).update(lease_expires_at=long_ago)
    assert variant_probes_reconcile(stalled_for_seconds=60) == 1
    assert VariantProbe.objects.get(pk=probe.pk).lease_expires_at is None
    # A finished probe is never queued again.
    VariantProbe.objects.filter(pk=probe.pk).update(status=VariantProbe.Status.DONE, queued_at=long_ago)
    assert variant_probes_reconcile(stalled_for_seconds=60) == 0


@pytest.mark.workers
@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_mid_probe_is_recovered_by_beat_and_nothing_is_stored_twice(alice, staff, tmp_path):
    flush_broker()
    environment = sums_environment(alice)
    release = threading.Event()

    def first_task_then_hold(prompt_text: str, seed: int) -> str:
        if FIRST not in prompt_text:
            release.wait(timeout=120)  # the first worker dies waiting here
        return honest(prompt_text, seed)

    with OpenAITestServer(respond=first_task_then_hold) as server:
        probe = probe_of(environment, staff, server)
        first = start_worker(name="first", extra_env=LEASE, log_path=tmp_path / "first.log")
        try:
            wait_for(
                lambda: VariantRollout.objects.filter(variant__probe=probe).count() == ROLLOUTS,
                timeout=240,
                interval=0.1,
                what="the first worker to store the first variant's attempts",
            )
            # The job is blocked in a generation; its heartbeat keeps the lease live.
            wait_for(
                lambda: VariantProbe.objects.get(pk=probe.pk).lease_expires_at is not None,
                timeout=30,
                what="the lease",
            )
        finally:
            stop_worker(first, hard=True)  # SIGKILL: no acknowledgement, no release of the lease
        stored = sorted(VariantRollout.objects.filter(variant__probe=probe).values_list("pk", flat=True))
        asked_before = requests_for(server, FIRST)
        assert VariantProbe.objects.get(pk=probe.pk).status == VariantProbe.Status.RUNNING
        release.set()
        with running_worker(name="second", extra_env=RECOVERY, beat_schedule=tmp_path / "beat-schedule"):
            wait_for(
                lambda: VariantProbe.objects.get(pk=probe.pk).status != VariantProbe.Status.RUNNING,
                timeout=240,
                what="beat to queue the probe again and the second worker to finish it",
            )
        asked_after = requests_for(server, FIRST)

    assert_complete_once(probe)
    # What the killed job stored is kept as it was, and its samples were not asked for again.
    first_variant = ImpossibleVariant.objects.get(probe=probe, task_version__task__key="sum-6-2")
    assert sorted(first_variant.rollouts.values_list("pk", flat=True)) == stored
    assert asked_after == asked_before
    assert VariantProbe.objects.get(pk=probe.pk).lease_expires_at is None


@pytest.mark.workers
@pytest.mark.django_db(transaction=True)
def test_a_probe_whose_message_was_dropped_is_queued_again_and_completes(alice, staff, tmp_path):
    flush_broker()
    environment = sums_environment(alice)
    with OpenAITestServer(respond=honest) as server:
        probe = probe_of(environment, staff, server)
        queued_at = VariantProbe.objects.get(pk=probe.pk).queued_at
        assert queued_at is not None
        flush_broker()  # the message is gone before any worker took it
        with running_worker(name="recovery", extra_env=RECOVERY, beat_schedule=tmp_path / "beat-schedule"):
            wait_for(
                lambda: VariantProbe.objects.get(pk=probe.pk).status != VariantProbe.Status.RUNNING,
                timeout=240,
                what="beat to queue the lost probe again and the worker to finish it",
            )
    assert_complete_once(probe)
    assert VariantProbe.objects.get(pk=probe.pk).queued_at > queued_at  # queued again by beat
