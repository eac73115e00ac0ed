"""What the campaign tests on tool servers (MCP and OpenEnv) share: a scripted model probing an environment inline
or through real Celery workers, and the outage stories every protocol must tell the same way (a server that cannot
be reached between rounds, a server killed in the middle of a campaign): retries, counted, never a wrong answer."""

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager

import pytest
from django.db.models import Count
from django.test import Client
from prometheus_client import REGISTRY

from calibration import services
from calibration.errors import ServerUnavailable
from calibration.models import Calibration, Campaign, Outcome, Rollout
from calibration.selectors import environment_health
from calibration.services.rounds import REWARD_DISAGREEMENT_FLAG
from tests.calibration.test_metrics import samples, total
from tests.support.mcp_kv_server import free_port, stop_process
from tests.support.openai_server import OpenAITestServer
from tests.support.workers import running_worker, wait_for

# Through workers: two rollouts a task, one round each.
ROLLOUTS = 2
# Retried rounds wait at most a second: the test waits for the server, not for back-off.
WORKER_ENV = {"PASSBAND_SERVER_RETRY_MAX_S": "1"}


def scripted_probe_model(base_url: str, name: str = "scripted"):
    return services.probe_model_add(
        name=name, backend="openai", base_url=base_url, model="fake-model", max_new_tokens=200
    )


def probe_inline(environment, alice, respond, *, rollouts: int = 2):
    """A campaign of `rollouts` per task run inline (no worker) against a scripted model; returns the campaign."""
    with OpenAITestServer(respond=respond, tool_parser=True) as model_server:
        campaign = services.campaign_start(
            environment=environment,
            probe_model=scripted_probe_model(model_server.base_url),
            created_by=alice,
            rollouts=rollouts,
            round_size=rollouts,
            seed=3,
            enqueue=False,
        )
        services.campaign_run_inline(campaign=campaign)
    return campaign


def assert_each_passes_flagged_as_disagreeing(campaign, *, tasks: int) -> None:
    """One rollout a task, each passed by the Passband check the task chose while the environment paid 0: the
    chosen reward counts, and the rollout is flagged and says so."""
    rollouts = list(Rollout.objects.filter(campaign=campaign))
    assert len(rollouts) == tasks
    for rollout in rollouts:
        assert rollout.outcome == Outcome.PASS
        assert rollout.episode["flags"] == [REWARD_DISAGREEMENT_FLAG]
        assert rollout.detail.startswith("rewards disagree: environment reward 0")


def failures_counted(**labels: str) -> float:
    """passband_mcp_failures_total in this process, summed over the samples with these labels."""
    return sum(
        sample.value
        for metric in REGISTRY.collect()
        if metric.name == "passband_mcp_failures"
        for sample in metric.samples
        if sample.name == "passband_mcp_failures_total"
        and all(sample.labels.get(key) == wanted for key, wanted in labels.items())
    )


def unreachable_round_is_withheld_then_passes(
    environment,
    alice,
    oracle,
    *,
    says: str,
    failed: str = "",
    labels: dict,
    serving: Callable[[], AbstractContextManager],
) -> None:
    """The environment's server is gone: a round's samples are withheld (nothing stored, each counted with
    `labels`, the error and the waiting campaign saying which server, `says`, and the error what `failed`), never
    failed; once `serving()` has the server back on its port, the same round is asked for again and passes."""
    with OpenAITestServer(respond=oracle, tool_parser=True) as model_server:
        campaign = services.campaign_start(
            environment=environment,
            probe_model=scripted_probe_model(model_server.base_url),
            created_by=alice,
            rollouts=2,
            round_size=2,
            enqueue=False,
        )
        item = campaign.items.order_by("task_version_id").first()
        before = failures_counted(**labels)
        with pytest.raises(ServerUnavailable) as raised:
            services.round_generate(campaign_id=campaign.pk, task_version_ids=[item.task_version_id], round_index=0)
        assert raised.value.withheld == 2 and raised.value.stored == 0
        assert says in str(raised.value) and f"failed {failed}" in str(raised.value)
        assert not Rollout.objects.filter(campaign=campaign).exists()
        assert failures_counted(**labels) == before + 2
        waiting = Campaign.objects.get(pk=campaign.pk)
        assert waiting.server_waiting_since is not None and says in waiting.server_error
        with serving():
            services.round_run(campaign_id=campaign.pk, task_version_ids=[item.task_version_id], round_index=0)
    rollouts = Rollout.objects.filter(campaign=campaign)
    assert rollouts.count() == 2 and set(rollouts.values_list("outcome", flat=True)) == {Outcome.PASS}
    assert Campaign.objects.get(pk=campaign.pk).server_waiting_since is None


def start_campaign(environment, alice, base_url: str, name: str):
    """A campaign of ROLLOUTS per task, enqueued for the workers."""
    return services.campaign_start(
        environment=environment,
        probe_model=scripted_probe_model(base_url, name),
        created_by=alice,
        rollouts=ROLLOUTS,
        round_size=ROLLOUTS,
    )


def wait_done(campaign, what: str) -> None:
    wait_for(lambda: Campaign.objects.get(pk=campaign.pk).status == Campaign.Status.DONE, timeout=180, what=what)


def oracle_and_null_through_workers(
    environment, alice, tmp_path, *, oracle, null_policy, tasks: int, extra_env: dict | None = None
):
    """Two campaigns at once through two worker processes (``extra_env``: more of their environment): the
    oracle's passes all `tasks` tasks, every rollout, and the null policy's fails every one. Returns (the
    oracle's campaign, the null policy's)."""
    with (
        OpenAITestServer(respond=oracle, tool_parser=True) as oracle_server,
        OpenAITestServer(respond=null_policy, tool_parser=True) as null_server,
        running_worker(concurrency=2, extra_env={**WORKER_ENV, **(extra_env or {})}, log_path=tmp_path / "worker.log"),
    ):
        solved = start_campaign(environment, alice, oracle_server.base_url, "oracle")
        unsolved = start_campaign(environment, alice, null_server.base_url, "null")
        wait_done(solved, "the oracle's campaign")
        wait_done(unsolved, "the null policy's campaign")
    for campaign, outcome in ((solved, Outcome.PASS), (unsolved, Outcome.FAIL)):
        stored = list(Rollout.objects.filter(campaign=campaign).values_list("outcome", "detail"))
        outcomes = [stored_outcome for stored_outcome, _ in stored]
        assert len(outcomes) == ROLLOUTS * tasks and set(outcomes) == {outcome}, stored
    passes = Calibration.objects.filter(probe_model__name="oracle").values_list("successes", flat=True)
    assert list(passes) == [ROLLOUTS] * tasks
    assert set(Calibration.objects.filter(probe_model__name="null").values_list("successes", flat=True)) == {0}
    return solved, unsolved


def server_killed_mid_campaign(
    staff,
    alice,
    settings,
    tmp_path,
    *,
    start_server: Callable[[int], object],
    environment_at: Callable[[int], object],
    oracle,
    kill_at_request: int,
    server: str,
    labels: dict,
    world: str,
    tasks: int,
) -> None:
    """The oracle's campaign through two workers while its tool server (`start_server(port)` starts it, returning
    the process; `environment_at(port)` makes the environment on it) is killed at the model's `kill_at_request`th
    request, then started again once the campaign waits for it and /metrics, read by `staff`, shows the failure
    (with `labels`).

    The outage costs retries and nothing else: every task ends with ROLLOUTS distinct samples, all passed; the
    environment's health shows the failed episodes (as `world`, the error naming `server`) beside the ones that ran.
    """
    metrics_dir = tmp_path / "metrics"
    metrics_dir.mkdir()
    settings.PASSBAND_METRICS_DIR = str(metrics_dir)
    port = free_port()
    running = {"process": start_server(port)}
    killed = threading.Event()
    requests = {"count": 0}

    def oracle_that_kills_the_server(prompt_text, seed):
        # The server dies while an episode of the campaign is under way.
        requests["count"] += 1
        if requests["count"] == kill_at_request:
            stop_process(running["process"])
            killed.set()
        return oracle(prompt_text, seed)

    try:
        environment = environment_at(port)
        with (
            OpenAITestServer(respond=oracle_that_kills_the_server, tool_parser=True) as model_server,
            running_worker(
                concurrency=2,
                extra_env={**WORKER_ENV, "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir)},
                log_path=tmp_path / "worker.log",
            ),
        ):
            campaign = start_campaign(environment, alice, model_server.base_url, "oracle")
            wait_for(killed.is_set, timeout=120, what=f"model request {kill_at_request}")
            wait_for(
                lambda: Campaign.objects.get(pk=campaign.pk).server_waiting_since is not None,
                timeout=120,
                interval=0.1,
                what=f"the campaign to wait for its server {server}",
            )
            client = Client()
            client.force_login(staff)
            # The campaign may also wait for the model server (a slow machine): wait for the failure to show
            # on /metrics rather than read it once.
            while_down = wait_for(
                lambda: (
                    (found := samples(client.get("/metrics").content.decode()))
                    and total(found, "passband_mcp_failures_total", **labels) >= 1
                    and found
                ),
                timeout=120,
                what="the server's failure on /metrics",
            )
            running["process"] = start_server(port)
            wait_done(campaign, f"the campaign to finish once the server {server} is back")
    finally:
        stop_process(running["process"])
    assert total(while_down, "passband_mcp_failures_total", **labels) >= 1
    reasons = {
        dict(sample_labels)["reason"]
        for name, sample_labels in while_down
        if name == "passband_mcp_failures_total" and sample_labels
    }
    assert reasons <= {"disconnected", "unreachable", "server_error", "timeout"}
    per_task = (
        Rollout.objects.filter(campaign=campaign)
        .values("task_version")
        .annotate(n=Count("id"), distinct=Count("sample_index", distinct=True))
    )
    assert sorted((row["n"], row["distinct"]) for row in per_task) == [(ROLLOUTS, ROLLOUTS)] * tasks
    # Every attempt that was stored is the oracle's, and passed: the outage made no wrong answers.
    assert set(Rollout.objects.filter(campaign=campaign).values_list("outcome", flat=True)) == {Outcome.PASS}
    calibrations = Calibration.objects.filter(probe_model__name="oracle")
    assert sorted((c.attempts, c.successes) for c in calibrations) == [(ROLLOUTS, ROLLOUTS)] * tasks
    assert Campaign.objects.get(pk=campaign.pk).server_waiting_since is None
    # The environment's page sees the outage: failed episodes with the server's error, beside the ones that ran,
    # and the time each session took to open and reset.
    (health,) = environment_health(environment=environment)
    assert health["world"] == world and health["failures"] >= 1
    assert health["episodes"] == health["failures"] + Rollout.objects.filter(campaign=campaign).count()
    assert server in health["last_error"] and health["reset_ms_mean"] > 0
