"""An environment's health: episodes attempted on each world, those the world failed, tool errors and reset
latency, a minute at a time, read back over the last hour; and a world that cannot reset makes its samples
fail as the world's (after a bounded retry, named) while its health shows the failure and why."""

from datetime import timedelta

import pytest
from django.utils import timezone

from calibration import selectors, services
from calibration.models import EpisodeHealth
from calibration.services.episodes import episodes_generate
from calibration.services.health import EpisodeAttempt, episode_health_record
from curation.models import TaskVersion
from curation.services import environment_create
from engine.backends.base import SamplingParams
from tests.engine.episodes.conftest import with_plugins  # noqa: F401 - the fixture
from tests.factories import import_tasks

pytestmark = pytest.mark.django_db


def transcript(*, reset_ms, ok=0, tool_error=0, timeout=0, malformed=0):
    calls = ok + tool_error + timeout + malformed
    counts = {"tool_calls": calls, "ok": ok, "tool_error": tool_error, "timeout": timeout, "malformed": malformed}
    return {"reset_ms": reset_ms, "counts": counts}


def test_attempts_add_up_per_world_and_the_last_hour_only(alice):
    environment = environment_create(name="ops", domain="workflow")
    now = timezone.now()
    episode_health_record(
        environment=environment,
        world="backoffice",
        attempts=[
            EpisodeAttempt(transcript=transcript(reset_ms=20.0, ok=3, malformed=1)),
            EpisodeAttempt(transcript=transcript(reset_ms=40.0, ok=1, tool_error=1, timeout=1)),
            EpisodeAttempt(failure="environment backoffice could not reset from seed 3: boom"),
        ],
        now=now,
    )
    # The same minute again (another batch, another worker): the counts add up in one row.
    episode_health_record(
        environment=environment,
        world="backoffice",
        attempts=[EpisodeAttempt(transcript=transcript(reset_ms=90.0, ok=2))],
        now=now,
    )
    episode_health_record(
        environment=environment,
        world="mcp:kv",
        attempts=[EpisodeAttempt(failure="MCP server kv: unreachable")],
        now=now - timedelta(minutes=5),
    )
    # Two hours ago: outside the window.
    episode_health_record(
        environment=environment,
        world="backoffice",
        attempts=[EpisodeAttempt(failure="old failure")] * 7,
        now=now - timedelta(hours=2),
    )
    assert EpisodeHealth.objects.filter(environment=environment, world="backoffice").count() == 2

    health = {row["world"]: row for row in selectors.environment_health(environment=environment, now=now)}
    assert list(health) == ["backoffice", "mcp:kv"]
    office = health["backoffice"]
    assert (office["episodes"], office["failures"]) == (4, 1)
    assert office["failure_rate"] == pytest.approx(0.25)
    # Malformed calls are the model's; tool errors and timeouts are the world's.
    assert (office["tool_calls"], office["tool_errors"]) == (9, 2)
    assert office["reset_ms_mean"] == pytest.approx(50.0) and office["reset_ms_max"] == 90.0
    assert office["last_error"] == "environment backoffice could not reset from seed 3: boom"
    kv = health["mcp:kv"]
    assert (kv["episodes"], kv["failures"], kv["failure_rate"]) == (1, 1, 1.0)
    assert kv["reset_ms_mean"] is None and kv["tool_error_rate"] is None
    # A wider window sees the old failures.
    wide = {row["world"]: row for row in selectors.environment_health(environment=environment, hours=3, now=now)}
    assert (wide["backoffice"]["episodes"], wide["backoffice"]["failures"]) == (11, 8)


def test_a_world_that_cannot_reset_is_the_worlds_failure_and_shows_why(alice, with_plugins):  # noqa: F811
    with_plugins(counter="counter")
    environment = environment_create(name="counting", domain="workflow")
    schema = {
        "type": "function",
        "function": {
            "name": "add",
            "parameters": {"type": "object", "properties": {"amount": {"type": "integer"}}, "required": ["amount"]},
        },
    }
    tasks = [
        {
            "key": "count-1",
            "prompt": [{"role": "user", "content": "Add 1."}],
            "tools": [schema],
            "verifier": {
                "kind": "state_check",
                "environment": "counter",
                "seed": 0,
                "checks": [{"table": "counters", "where": {"id": 1}, "expect": {"value": 1}}],
            },
            "answer": '[{"name": "add", "arguments": {"amount": 1}}]',
        }
    ]
    report = import_tasks(environment, alice, *tasks)
    assert report.ok, report.problems
    version = TaskVersion.objects.get(task__environment=environment)
    # The world the task names stopped resetting after import (a new release of the plug-in, say).
    TaskVersion.objects.filter(pk=version.pk).update(verifier={**version.verifier, "seed": 13})
    version.refresh_from_db()
    probe_model = services.probe_model_add(
        name="unused", backend="openai", base_url="http://127.0.0.1:9/v1", model="unused"
    )
    generations, episodes = episodes_generate(
        version=version, probe_model=probe_model, seeds=[1, 2], params=SamplingParams(max_new_tokens=8)
    )
    # No model call was made (the server above does not exist) and nothing is evidence: after a bounded retry,
    # the failure is the world's, named.
    assert [g.error_kind for g in generations] == ["world", "world"]
    assert generations[0].error.startswith("world counter: ") and "tried 3 times" in generations[0].error
    assert "counter could not reset from seed 13" in generations[0].error and episodes == [None, None]
    (row,) = selectors.environment_health(environment=environment)
    assert (row["world"], row["episodes"], row["failures"]) == ("counter", 2, 2)
    assert "no world for seed 13" in row["last_error"]


def test_old_minutes_are_pruned_and_the_recent_kept(alice):
    from calibration.tasks import prune_episode_health

    environment = environment_create(name="ops", domain="workflow")
    now = timezone.now()
    for age in (timedelta(minutes=1), timedelta(days=6), timedelta(days=8), timedelta(days=30)):
        episode_health_record(
            environment=environment, world="backoffice", attempts=[EpisodeAttempt(failure="x")], now=now - age
        )
    assert prune_episode_health() == 2  # the beat's job, with the default of 7 days
    assert EpisodeHealth.objects.filter(environment=environment).count() == 2
