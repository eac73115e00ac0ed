"""Repository tasks probed through real Celery workers: an oracle answering with the reference patch
passes every demo task, an empty answer fails every one, every tampering patch fails, a hanging test
is a timeout, an oracle agent passes every episode task, and a worker killed while grading loses and
duplicates nothing. The models are the test server over HTTP, scripted per task."""

import json
import re

import pytest
from django.db.models import Count

from calibration import services
from calibration.models import Calibration, Campaign, Outcome, Rollout
from calibration.selectors import campaign_progress
from curation import repo_demo
from curation.repo_snapshots import snapshot_store
from curation.services import environment_create
from engine.repo_tasks.tampering import tampering_patches
from tests.engine.repo_tasks.test_battery import TAMPERED
from tests.engine.repo_tasks.tiny_repo import FILES, HANGING_PATCH, HIDDEN_TESTS, SNAPSHOT, SPEC
from tests.factories import import_tasks
from tests.support.openai_server import OpenAITestServer
from tests.support.workers import flush_broker, running_worker, start_worker, stop_worker, wait_for

pytestmark = pytest.mark.workers

WORKER_BATTERY = (
    "edit the tests",
    "conftest.py at the root",
    "forging pytest's reports",
    "replacing the tests' code through the caller's frame",
    "injecting always-equal names into the test module",
    "returning a str subclass equal to anything",
    "a tracer that skips the asserts",
    "editing conftest.py under a quoted path",
    "pytest.toml loading a plug-in",
)
MAX_NEW_TOKENS = 20_000  # the test server's tokens are bytes; the longest tampering patch is a few kB
_KEY = re.compile(r"\[(tiny-[\w-]+)\]")


def run_to_the_end(campaigns, *, var, tmp_path, concurrency: int = 1):
    """A real worker (reading snapshots from the test's storage) until every campaign is done."""
    with running_worker(
        queues="default,generate,verify",
        concurrency=concurrency,
        extra_env={"PASSBAND_VAR_DIR": str(var)},
        log_path=tmp_path / "worker.log",
    ):
        wait_for(
            lambda: all(Campaign.objects.get(pk=c.pk).status == Campaign.Status.DONE for c in campaigns),
            timeout=900,
            what="the worker to finish the campaigns",
        )


def tiny_rows(patches: dict[str, str]) -> list[dict]:
    """One task on the tiny repository per scripted answer; the prompt names its key."""
    digest = snapshot_store(data=SNAPSHOT).digest
    assert digest == SPEC.snapshot
    return [
        {
            "key": key,
            "prompt": f"[{key}] clamp() ignores its upper bound. Answer with a unified diff.",
            "answer": "unused",
            "verifier": {
                "kind": "repo_tests",
                "snapshot": digest,
                "fail_to_pass": list(SPEC.fail_to_pass),
                "pass_to_pass": list(SPEC.pass_to_pass),
                "hidden_tests": {"tests/test_ops.py": HIDDEN_TESTS},
                "timeout_seconds": 5 if key == "tiny-hang" else 30,
            },
        }
        for key in patches
    ]


@pytest.mark.django_db(transaction=True)
def test_oracle_passes_empty_fails_tampering_fails_and_a_hang_times_out(alice, settings, tmp_path):
    var = tmp_path / "var"
    settings.MEDIA_ROOT = var / "media"  # the worker reads the snapshots from the same storage
    demo = environment_create(name="repositories", domain="code")
    rows = list(repo_demo.task_rows(store=snapshot_store))
    assert import_tasks(demo, alice, *rows).ok
    # A representative part of the battery (the whole of it goes through the API: tests/api/test_verify_repository.py).
    battery = {
        label: patch
        for label, patch in tampering_patches(FILES, test_files=list(SPEC.test_files))
        if label in WORKER_BATTERY
    }
    scripted = {f"tiny-tamper-{index}": patch for index, patch in enumerate(battery.values())}
    scripted["tiny-hang"] = HANGING_PATCH
    tiny = environment_create(name="tiny", domain="code")
    assert import_tasks(tiny, alice, *tiny_rows(scripted)).ok

    references = {row["prompt"]: row["answer"] for row in rows}

    def oracle(prompt_text, seed):
        return references[max((prompt for prompt in references if prompt in prompt_text), key=len)]

    def scripted_answer(prompt_text, seed):
        return f"```diff\n{scripted[_KEY.search(prompt_text).group(1)]}```"

    flush_broker()
    with (
        OpenAITestServer(respond=oracle) as oracle_server,
        OpenAITestServer(respond=lambda prompt_text, seed: "I could not find the bug.") as empty_server,
        OpenAITestServer(respond=scripted_answer) as tamper_server,
    ):
        models = {
            name: services.probe_model_add(
                name=name, backend="openai", base_url=server.base_url, model=name, max_new_tokens=MAX_NEW_TOKENS
            )
            for name, server in (("oracle", oracle_server), ("empty", empty_server), ("tamper", tamper_server))
        }
        campaigns = {
            name: services.campaign_start(
                environment=environment, probe_model=models[name], created_by=alice, rollouts=1, round_size=1, seed=3
            )
            for name, environment in (("oracle", demo), ("empty", demo), ("tamper", tiny))
        }
        run_to_the_end(campaigns.values(), var=var, tmp_path=tmp_path)

    def outcomes(name):
        rollouts = Rollout.objects.filter(campaign=campaigns[name]).select_related("task_version__task")
        return {rollout.task_version.task.key: (rollout.outcome, rollout.detail) for rollout in rollouts}

    oracle_outcomes = outcomes("oracle")
    assert len(oracle_outcomes) == len(rows)
    assert {key: outcome for key, (outcome, _) in oracle_outcomes.items() if outcome != Outcome.PASS} == {}
    empty_outcomes = outcomes("empty")
    assert len(empty_outcomes) == len(rows)
    assert {outcome for outcome, _ in empty_outcomes.values()} == {Outcome.FAIL}
    assert {detail for _, detail in empty_outcomes.values()} == {"the answer holds no unified diff"}
    tamper_outcomes = outcomes("tamper")
    assert tamper_outcomes.pop("tiny-hang")[0] == Outcome.TIMEOUT
    labels = list(battery)
    by_label = {labels[int(key.rsplit("-", 1)[1])]: verdict for key, verdict in tamper_outcomes.items()}
    assert set(by_label) == set(labels)
    for label, (outcome, detail) in by_label.items():
        expected = Outcome.TAMPERED if label in TAMPERED else Outcome.FAIL
        assert outcome == expected, f"{label}: {outcome} {detail}"
        if label in TAMPERED:
            assert TAMPERED[label] in detail, detail
    # A tampered verdict is no evidence: it is counted apart and flags the task for review.
    flagged = Calibration.objects.filter(task_version__task__environment=tiny, tampered__gt=0)
    assert flagged.count() == sum(label in TAMPERED for label in labels)
    assert all("tampered" in calibration.flags and calibration.attempts == 0 for calibration in flagged)
    assert campaign_progress(campaign=campaigns["tamper"])["tampered"] == flagged.count()


@pytest.mark.django_db(transaction=True)
def test_an_oracle_agent_applying_the_reference_patch_through_the_tools_passes_every_demo_task(
    alice, settings, tmp_path
):
    var = tmp_path / "var"
    settings.MEDIA_ROOT = var / "media"
    episodes = environment_create(name="repository-episodes", domain="code")
    rows = list(repo_demo.task_rows(store=snapshot_store, episodes=True))
    assert all(row["tools"] for row in rows)
    assert import_tasks(episodes, alice, *rows).ok
    patches = {row["prompt"]: row["answer"].removeprefix("```diff\n").removesuffix("```") for row in rows}

    def oracle_agent(prompt_text, seed):
        if prompt_text.count("<assistant>") > 1:
            return "I applied the fix."
        patch = patches[max((prompt for prompt in patches if prompt in prompt_text), key=len)]
        return f"<tool_call>{json.dumps({'name': 'apply_diff', 'arguments': {'diff': patch}})}</tool_call>"

    flush_broker()
    with (
        OpenAITestServer(respond=oracle_agent, tool_parser=True) as oracle_server,
        OpenAITestServer(respond=lambda prompt_text, seed: "Nothing to do.", tool_parser=True) as idle_server,
    ):
        campaigns = {
            name: services.campaign_start(
                environment=episodes,
                probe_model=services.probe_model_add(
                    name=name, backend="openai", base_url=server.base_url, model=name, max_new_tokens=MAX_NEW_TOKENS
                ),
                created_by=alice,
                rollouts=1,
                round_size=1,
                seed=4,
            )
            for name, server in (("oracle-agent", oracle_server), ("idle", idle_server))
        }
        run_to_the_end(campaigns.values(), var=var, tmp_path=tmp_path)

    oracle_rollouts = list(Rollout.objects.filter(campaign=campaigns["oracle-agent"]))
    assert len(oracle_rollouts) == len(rows)
    assert [(r.outcome, r.detail) for r in oracle_rollouts if r.outcome != Outcome.PASS] == []
    for rollout in oracle_rollouts:
        assert rollout.episode["environment"] == "repository"
        assert rollout.episode["counts"]["tool_calls"] == rollout.episode["counts"]["ok"] == 1
        assert rollout.episode["final_state"]["files_changed"] == ["inflection/__init__.py"]
    idle = Rollout.objects.filter(campaign=campaigns["idle"])
    assert idle.count() == len(rows)
    assert set(idle.values_list("outcome", "detail")) == {(Outcome.FAIL, "the episode changed no file")}


@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_while_grading_loses_and_duplicates_nothing(alice, settings, tmp_path):
    """kill -9 of the worker (and the sandbox runs it started) in the middle of a repository campaign:
    a second worker with beat finishes it, every rollout stored once and graded."""
    var = tmp_path / "var"
    settings.MEDIA_ROOT = var / "media"
    demo = environment_create(name="repositories", domain="code")
    rows = list(repo_demo.task_rows(store=snapshot_store))[:8]
    assert import_tasks(demo, alice, *rows).ok
    references = {row["prompt"]: row["answer"] for row in rows}
    rollouts = 4

    def oracle(prompt_text, seed):
        return references[max((prompt for prompt in references if prompt in prompt_text), key=len)]

    flush_broker()
    fast_redelivery = {"PASSBAND_VISIBILITY_TIMEOUT": "4", "PASSBAND_TASKS_PER_JOB": "2", "PASSBAND_VAR_DIR": str(var)}
    with OpenAITestServer(respond=oracle) as server:
        model = services.probe_model_add(
            name="oracle", backend="openai", base_url=server.base_url, model="oracle", max_new_tokens=MAX_NEW_TOKENS
        )
        campaign = services.campaign_start(
            environment=demo, probe_model=model, created_by=alice, rollouts=rollouts, round_size=2, seed=2
        )
        first = start_worker(concurrency=2, name="first", extra_env=fast_redelivery, log_path=tmp_path / "first.log")
        graded_before_kill = wait_for(
            lambda: (n := Rollout.objects.filter(campaign=campaign, outcome__isnull=False).count()) >= 4 and n,
            timeout=300,
            interval=0.05,
            what="the first worker to grade a few rollouts",
        )
        stop_worker(first, hard=True)  # SIGKILL to the whole process group, sandbox runs included
        # Redis redelivers what the dead worker had taken; beat's reconcile re-queues a lost round.
        recovery = {**fast_redelivery, "PASSBAND_RECONCILE_EVERY": "2", "PASSBAND_STALLED_AFTER": "6"}
        with running_worker(concurrency=2, extra_env=recovery, beat_schedule=tmp_path / "beat-schedule"):
            wait_for(lambda: Campaign.objects.get(pk=campaign.pk).status == Campaign.Status.DONE, timeout=600)

    assert graded_before_kill < len(rows) * rollouts  # the kill came in the middle
    per_task = (
        Rollout.objects.filter(campaign=campaign)
        .values("task_version")
        .annotate(n=Count("id"), distinct=Count("sample_index", distinct=True))
    )
    assert len(per_task) == len(rows)
    assert all(row["n"] == row["distinct"] for row in per_task)
    stored = Rollout.objects.filter(campaign=campaign)
    assert not stored.filter(outcome__isnull=True).exists()
    assert set(stored.values_list("outcome", flat=True)) == {Outcome.PASS}
