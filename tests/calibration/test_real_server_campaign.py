"""Campaigns through real Celery workers against the real llama.cpp server: exact capture checked
against the server's own tokenizer, a prompt longer than the context, and the server killed mid-campaign."""

import io
import signal
import time

import pytest
from django.core.management import call_command
from django.db.models import Count

from calibration import services
from calibration.models import Calibration, Campaign, Outcome, Rollout
from engine import stats
from engine.backends.base import SamplingParams
from engine.backends.openai_backend import OpenAIBackend
from engine.backends.openai_transport import EVENT_HOOKS
from tests.factories import import_tasks
from tests.support.llama_server import LlamaServer
from tests.support.workers import flush_broker, start_worker, stop_worker, wait_for

pytestmark = [pytest.mark.server, pytest.mark.workers]


def arithmetic_tasks(environment, owner, count: int, *, long_prompt: bool = False):
    tasks = [
        {"key": f"sum-{i}", "prompt": f"What is {i} + {i + 3}? Answer with the number.", "answer": str(2 * i + 3)}
        for i in range(count)
    ]
    if long_prompt:
        tasks.append({"key": "too-long", "prompt": "Add these numbers: " + "1 + " * 3000 + "1", "answer": "3001"})
    import_tasks(environment, owner, *tasks)


def llama_probe_model(url: str, **options):
    return services.probe_model_add(
        name=options.pop("name", "smollm2-llama"),
        backend="openai",
        server="llama.cpp",
        base_url=f"{url}/v1",
        model="smollm2",
        max_new_tokens=options.pop("max_new_tokens", 24),
        temperature=1.0,
        **options,
    )


@pytest.mark.django_db(transaction=True)
def test_a_campaign_captures_the_servers_own_tokens(llama_server, arithmetic, alice, tmp_path):
    flush_broker()
    arithmetic_tasks(arithmetic, alice, 5, long_prompt=True)
    model = llama_probe_model(llama_server)
    campaign = services.campaign_start(
        environment=arithmetic, probe_model=model, created_by=alice, rollouts=4, round_size=4, seed=3
    )
    worker = start_worker(concurrency=2, log_path=tmp_path / "worker.log")
    try:
        wait_for(lambda: Campaign.objects.get(pk=campaign.pk).status == Campaign.Status.DONE, timeout=300, what="done")
    finally:
        stop_worker(worker)
    rollouts = Rollout.objects.filter(campaign=campaign)
    probed = rollouts.exclude(task_version__task__key="too-long")
    assert probed.count() == 20 and set(probed.values_list("capture", flat=True)) == {"exact"}
    assert set(probed.values_list("logprob_source", "prompt_ids_source")) == {("pre_sampling", "tokenize_endpoint")}
    assert not probed.filter(outcome=Outcome.GENERATION_ERROR).exists()
    out = io.StringIO()
    call_command("capture_check", campaign.pk, stdout=out)
    assert "All 20 rollouts" in out.getvalue()
    # The prompt that does not fit: the task's error, shown on its calibration; one round, then it stops.
    too_long = rollouts.filter(task_version__task__key="too-long")
    assert set(too_long.values_list("outcome", flat=True)) == {Outcome.PROMPT_TOO_LONG}
    calibration = Calibration.objects.get(task_version__task__key="too-long", probe_model=model)
    assert stats.Flag.PROMPT_TOO_LONG in calibration.flags and calibration.attempts == 0


@pytest.mark.django_db(transaction=True)
def test_a_server_killed_mid_campaign_and_restarted_loses_and_duplicates_nothing(arithmetic, alice, tmp_path):
    flush_broker()
    tasks, rollouts_per_task = 4, 4
    arithmetic_tasks(arithmetic, alice, tasks)
    with LlamaServer(slots=2) as server:
        # Short retries, so the outage outlasts them: those samples must wait, not become errors.
        model = llama_probe_model(server.url, timeout_s=10)
        campaign = services.campaign_start(
            environment=arithmetic,
            probe_model=model,
            created_by=alice,
            rollouts=rollouts_per_task,
            round_size=2,
            seed=5,
        )
        worker = start_worker(
            concurrency=1,
            log_path=tmp_path / "worker.log",
            extra_env={"PASSBAND_SERVER_RETRY_MAX_S": "4", "PASSBAND_TASKS_PER_JOB": "2"},
        )
        try:
            wait_for(lambda: Rollout.objects.filter(campaign=campaign).count() >= 4, timeout=180, what="first rollouts")
            server.kill()
            waiting = wait_for(
                lambda: Campaign.objects.get(pk=campaign.pk).server_waiting_since is not None,
                timeout=120,
                what="the campaign to say it waits for its server",
            )
            assert waiting
            stored_during_outage = Rollout.objects.filter(campaign=campaign).count()
            time.sleep(12)  # three of the worker's longest pauses between retries (PASSBAND_SERVER_RETRY_MAX_S)
            assert Campaign.objects.get(pk=campaign.pk).status == Campaign.Status.RUNNING
            assert Rollout.objects.filter(campaign=campaign).count() == stored_during_outage
            server.start()
            wait_for(
                lambda: Campaign.objects.get(pk=campaign.pk).status == Campaign.Status.DONE,
                timeout=300,
                what="the campaign to finish once the server is back",
            )
        finally:
            stop_worker(worker)
    finished = Campaign.objects.get(pk=campaign.pk)
    assert finished.server_waiting_since is None and finished.server_error == ""
    per_task = (
        Rollout.objects.filter(campaign=campaign)
        .values("task_version")
        .annotate(n=Count("id"), distinct=Count("sample_index", distinct=True))
    )
    assert len(per_task) == tasks and all(row["n"] == row["distinct"] == rollouts_per_task for row in per_task)
    assert not Rollout.objects.filter(campaign=campaign, outcome=Outcome.GENERATION_ERROR).exists()


def test_a_server_that_accepts_but_never_answers_times_out_and_is_retried():
    # SIGSTOP: the kernel still accepts connections for the frozen server, which never answers.
    events = []
    EVENT_HOOKS.append(lambda event, labels: events.append((event, labels)))
    try:
        with LlamaServer(slots=1) as server:
            server.process.send_signal(signal.SIGSTOP)
            try:
                client = OpenAIBackend(
                    base_url=server.url,
                    model="smollm2",
                    server="llama.cpp",
                    timeout_s=1,
                    max_retries=2,
                    backoff_base_s=0.05,
                )
                [generation] = client.generate(
                    messages=[{"role": "user", "content": "Hi"}], seeds=[1], params=SamplingParams(max_new_tokens=4)
                )
            finally:
                server.process.send_signal(signal.SIGCONT)
    finally:
        EVENT_HOOKS.pop()
    assert generation.finish_reason == "error" and generation.error_kind == "infrastructure"
    assert "ReadTimeout" in generation.error
    retries = [labels for event, labels in events if event == "retry"]
    assert len(retries) == 2 and {labels["reason"] for labels in retries} == {"transport"}
