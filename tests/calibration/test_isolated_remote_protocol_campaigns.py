"""An installed world provider of a remote protocol runs out of the worker's process, through a real Celery worker:
the `leaky-http` provider of tests/support/hostile_remote_protocol.py, declared by a dist-info on a folder of its
own as installing its package would, gives worlds on a counter-http server registered by staff. Its client's
requests reach that server (the episodes pass), made by the host; from inside the episode and from its listing of
tools it cannot write a file outside, open a socket, read the worker's secrets or the server's credentials, or
reach another address through the endpoint's client or around it."""

import json
import os
from pathlib import Path

import pytest
from django.conf import settings

from calibration.models import Outcome, Rollout
from curation.mcp_servers import environment_use_mcp_server, mcp_server_register
from curation.services import environment_create
from engine.worlds import registry as worlds
from tests.calibration.scripted import calls_then_done, observed_tools, probe_through_a_worker
from tests.factories import import_tasks
from tests.support import hostile_remote_protocol as leaky
from tests.support.counter_protocol import serve_counter_http
from tests.support.hostile_worlds import MARKER
from tests.support.plugin_packages import declared_installed
from tests.support.workers import flush_broker, running_worker, test_database_url

pytestmark = pytest.mark.workers

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def leaky_installed(tmp_path, monkeypatch):
    entry = {leaky.NAME: "tests.support.hostile_remote_protocol:PROVIDER"}
    site = declared_installed(monkeypatch, tmp_path, "passband-leaky-http", entry)
    worlds.refresh()
    if os.path.exists(MARKER):
        os.remove(MARKER)
    yield {"PYTHONPATH": f"{site}:{ROOT}"}
    worlds.refresh()


def leaky_task(key: str, seed: int) -> dict:
    calls = [{"name": name, "arguments": {}} for name in leaky.HOSTILE]
    return {
        "key": key,
        "prompt": [{"role": "user", "content": f"[{key}] Bring the counter to 10, then say done."}],
        "answer": json.dumps([*calls, {"name": "counter_add", "arguments": {"amount": 10 - seed}}]),
        "tools": leaky.TOOL_SCHEMAS,
        "verifier": {"kind": "episode_reward", "reward": "environment", "seed": seed},
    }


@pytest.mark.django_db(transaction=True)
def test_a_hostile_remote_provider_reaches_its_server_alone_through_the_host(leaky_installed, alice):
    assert worlds.provider_registry().entry(leaky.NAME).distribution == "passband-leaky-http"
    tasks = [leaky_task("leak-3", 3), leaky_task("leak-6", 6)]
    policy = calls_then_done({task["key"]: json.loads(task["answer"]) for task in tasks})

    environment = environment_create(name="leaky", domain="workflow")
    with serve_counter_http() as url:
        # Its list_tools ran in a helper and raises when any attempt worked: the registration's check passing
        # is every attempt refused there too.
        server = mcp_server_register(name="leaky-counter", url=url, protocol=leaky.NAME)
        assert [tool["name"] for tool in server.tools] == [schema["function"]["name"] for schema in leaky.TOOL_SCHEMAS]
        environment_use_mcp_server(environment=environment, server=server)
        assert import_tasks(environment, alice, *tasks).ok
        flush_broker()
        with running_worker(queues="default,generate,verify", concurrency=1, extra_env=leaky_installed):
            _, campaign = probe_through_a_worker(
                environment, alice, policy, "leaky", rollouts=2, tool_parser=True, max_new_tokens=1000
            )

    rollouts = list(Rollout.objects.filter(campaign=campaign))
    assert len(rollouts) == 4
    secrets = [settings.SECRET_KEY, test_database_url(), settings.CELERY_BROKER_URL]
    for rollout in rollouts:
        assert rollout.outcome == Outcome.PASS, rollout.detail  # the server was reached: the counter got to 10
        observed = observed_tools(rollout)
        assert observed["hostile_write"].startswith("refused: Forbidden: writing files")
        assert observed["hostile_socket"].startswith("refused: Forbidden: socket")
        secrets_report = json.loads(observed["hostile_secrets"])
        assert set(secrets_report["environ"]) <= {"LC_CTYPE"} and secrets_report["headers"] == {}
        assert secrets_report["parent"].startswith("refused: Forbidden: reading another process's /proc")
        assert observed["hostile_elsewhere"].startswith(
            "refused: ConnectError: refused by the host: only the registered server http://127.0.0.1:"
        ), observed["hostile_elsewhere"]
        # httpx wraps the lockdown's refusal (of the name's lookup, before any connection) in its ConnectError.
        assert observed["hostile_around"].startswith("refused: ConnectError: socket."), observed["hostile_around"]
        assert "is not allowed while scoring" in observed["hostile_around"]
        assert not [secret for secret in secrets if secret in json.dumps(rollout.episode)]
    assert not os.path.exists(MARKER)
