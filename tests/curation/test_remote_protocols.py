"""A remote protocol added by a world provider alone (tests/support/counter_protocol.py, `counter-http`), with no
change to Passband: the server's protocol is validated against the world-provider registry (the model, the
service, the staff page's choices), a server of it is registered and checked through its provider, and its
tasks are probed end to end through a real worker that found the provider through its entry point."""

import json
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError

from calibration.models import Outcome, Rollout
from calibration.services.worlds import world_provider, world_task
from curation.errors import CurationError
from curation.mcp_servers import environment_use_mcp_server, mcp_server_register
from curation.models import Environment, McpServer
from curation.services import environment_create
from engine.worlds import registry as worlds
from engine.worlds.provider import WorldMissing, WorldOptions
from tests.calibration.scripted import probe_through_a_worker
from tests.factories import import_tasks
from tests.support import counter_protocol
from tests.support.counter_protocol import serve_counter_http
from tests.support.workers import flush_broker, running_worker

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def counter_installed(tmp_path, monkeypatch):
    """The provider declared under passband.environments by a dist-info on a folder of its own, seen by this
    process's registry and by the workers, as installing its package would."""
    site = tmp_path / "site"
    info = site / "passband_counter_http-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: passband-counter-http\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(
        f"[{worlds.GROUP}]\n{counter_protocol.NAME} = tests.support.counter_protocol:PROVIDER\n"
    )
    monkeypatch.syspath_prepend(str(site))
    worlds.refresh()
    yield {"PYTHONPATH": f"{site}:{ROOT}"}
    worlds.refresh()


def counter_task(key: str, seed: int) -> dict:
    return {
        "key": key,
        "prompt": [{"role": "user", "content": f"[{key}] Bring the counter to 10, then say done."}],
        "answer": json.dumps([{"name": "counter_add", "arguments": {"amount": 10 - seed}}]),
        "tools": counter_protocol.TOOL_SCHEMAS,
        "verifier": {"kind": "episode_reward", "reward": "environment", "seed": seed},
    }


@pytest.mark.django_db
def test_the_protocol_comes_from_the_registry_not_a_fixed_list(counter_installed, client, staff):
    assert worlds.provider_registry().entry("counter-http").distribution == "passband-counter-http"
    with pytest.raises(CurationError, match=r"protocol: must be one of mcp, openenv, counter-http .*got 'gopher'"):
        mcp_server_register(name="old", url="http://127.0.0.1:9", protocol="gopher", check=False)
    with pytest.raises(ValidationError) as refused:
        McpServer(name="old", url="http://127.0.0.1:9", protocol="gopher").full_clean()
    assert "'gopher' is not a remote protocol of this installation" in str(refused.value.message_dict["protocol"])
    McpServer(name="new", url="http://127.0.0.1:9", protocol="counter-http").full_clean(exclude=["created_by"])
    client.force_login(staff)
    page = client.get("/mcp-servers/").content.decode()
    assert '<option value="counter-http">Counter server</option>' in page
    assert '<option value="mcp" selected>MCP server</option>' in page


@pytest.mark.django_db
def test_a_server_of_the_protocol_is_checked_by_its_provider_and_gives_its_tasks_worlds(counter_installed, alice):
    environment = environment_create(name="counting", domain="workflow")
    with serve_counter_http() as url:
        server = mcp_server_register(name="counter", url=url, protocol="counter-http")
        assert [tool["name"] for tool in server.tools] == ["counter_add", "counter_read"]
        assert server.protocol_label == "Counter server" and server.reward_tool == ""
        environment = environment_use_mcp_server(environment=environment, server=server)
        assert environment.kind == "counter-http" and environment.remote_server == server
        environment.full_clean()
        import_tasks(environment, alice, counter_task("count-3", 3))
        version = environment.tasks.get().current_version
        provider = world_provider(version)
        assert provider is not None and provider.name == "counter-http"
    with pytest.raises(CurationError, match="url: the server did not answer: ConnectError"):
        mcp_server_register(name="gone", url=url, protocol="counter-http")
    with pytest.raises(CurationError, match=r"url: a Counter server is reached by its URL, .*\(no stdio\)"):
        mcp_server_register(name="piped", stdio="kv", protocol="counter-http", check=False)
    # A worker without the provider's package: the samples wait, saying what is missing (never plain prompts).
    worlds.provider_registry().unregister("counter-http")
    with pytest.raises(WorldMissing, match="no world provider here gives worlds on counter-http servers"):
        world_provider(version).prepare(world_task(version), WorldOptions())


@pytest.mark.workers
@pytest.mark.django_db(transaction=True)
def test_its_tasks_are_probed_through_a_real_worker(counter_installed, alice):
    tasks = [counter_task("count-3", 3), counter_task("count-7", 7)]

    def oracle(prompt_text, seed):
        if prompt_text.count("<assistant>") > 1:
            return "Done."
        task = next(task for task in tasks if f"[{task['key']}]" in prompt_text)
        return f"<tool_call>{json.dumps(json.loads(task['answer'])[0])}</tool_call>"

    environment = environment_create(name="counting", domain="workflow")
    with serve_counter_http() as url:
        environment_use_mcp_server(
            environment=environment, server=mcp_server_register(name="counter", url=url, protocol="counter-http")
        )
        assert import_tasks(environment, alice, *tasks).ok
        flush_broker()
        worker = running_worker(queues="default,generate,verify", concurrency=1, extra_env=counter_installed)
        with worker:
            campaigns = {
                policy: probe_through_a_worker(environment, alice, respond, policy, rollouts=2, max_new_tokens=600)[1]
                for policy, respond in (("oracle", oracle), ("null", lambda prompt_text, seed: "Done."))
            }
    for policy, campaign in campaigns.items():
        rollouts = Rollout.objects.filter(campaign=campaign)
        wanted = Outcome.PASS if policy == "oracle" else Outcome.FAIL
        assert [(rollout.outcome, rollout.detail) for rollout in rollouts if rollout.outcome != wanted] == [], policy
        assert rollouts.count() == 4
        assert {rollout.episode["environment"] for rollout in rollouts} == {"counter-http"}
    assert Environment.objects.get(name="counting").kind == "counter-http"
