"""A generation that outlasts the stall limit is not a stall: real workers against the real llama-server behind a
proxy that answers each request late. No round is queued again while its worker lives (its lease is renewed by
a heartbeat); once that worker is killed, the round is queued again exactly once, and the campaign completes."""

import pytest

from calibration import services
from calibration.models import Campaign, Rollout
from tests.calibration.test_real_server_campaign import llama_probe_model
from tests.factories import import_tasks
from tests.support.server_campaigns import wait_done
from tests.support.slow_proxy import SlowProxy
from tests.support.workers import flush_broker, start_worker, stop_worker, wait_for

pytestmark = [pytest.mark.server, pytest.mark.workers]

# Every answer takes longer than the lease and the stall limit together, with beat reconciling every second.
LIMITS = {"PASSBAND_ROUND_LEASE_S": "3", "PASSBAND_STALLED_AFTER": "3", "PASSBAND_RECONCILE_EVERY": "1"}
DELAY_S = 8
ROLLOUTS, ROUND = 4, 2


def stalled_rounds(campaign) -> int:
    return Campaign.objects.get(pk=campaign.pk).stalled_rounds


def worker_ready(log) -> bool:
    return log.exists() and b" ready." in log.read_bytes()


@pytest.mark.django_db(transaction=True)
def test_a_slow_server_is_no_stall_and_a_killed_workers_round_is_queued_again_once(
    llama_server, arithmetic, alice, tmp_path
):
    flush_broker()
    import_tasks(arithmetic, alice, {"key": "slow", "prompt": "What is 2 + 2? Answer with the number.", "answer": "4"})
    workers = []

    def worker(name: str, queues: str, **options):
        log = tmp_path / f"{name}.log"
        workers.append(start_worker(queues=queues, concurrency=2, name=name, extra_env=LIMITS, log_path=log, **options))
        wait_for(lambda: worker_ready(log), timeout=120, what=f"the {name} worker to start")
        return workers[-1]

    try:
        with SlowProxy(llama_server, delay_s=DELAY_S) as proxy:
            model = llama_probe_model(proxy.url, max_new_tokens=8)
            worker("beat", "default", beat_schedule=tmp_path / "beat-schedule")
            first = worker("first", "generate,verify")
            campaign = services.campaign_start(
                environment=arithmetic, probe_model=model, created_by=alice, rollouts=ROLLOUTS, round_size=ROUND, seed=1
            )
            # Round 0 outlasts both limits and is stored; round 1's request is at the server: nothing was re-queued.
            wait_for(
                lambda: Rollout.objects.filter(campaign=campaign).count() >= ROUND and proxy.in_flight,
                timeout=240,
                interval=0.2,
                what="round 0 stored and round 1 waiting for the slow server",
            )
            proxy.hold()  # round 1's answer waits, however quickly a second worker starts
            assert proxy.answered >= 1 and stalled_rounds(campaign) == 0
            # A second worker stands by; the first is killed in the middle of its generation.
            worker("second", "generate,verify")
            assert proxy.in_flight and stalled_rounds(campaign) == 0
            stop_worker(first, hard=True)
            proxy.release()
            wait_done(campaign, "the campaign to finish on the second worker")
    finally:
        for process in workers:
            stop_worker(process)
    # The killed worker's round (one task) was queued again once, whichever limit noticed it first.
    assert stalled_rounds(campaign) == 1
    samples = list(Rollout.objects.filter(campaign=campaign).values_list("sample_index", flat=True))
    assert sorted(samples) == list(range(ROLLOUTS))
