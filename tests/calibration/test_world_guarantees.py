"""What every world guarantees, through real Celery workers (docs/environments.md, "What every world
guarantees"):

* a tool the task does not offer never runs, and is never paid (a plug-in's other tool, called by a policy
  searching for reward);
* a world that cannot reset from the task's seed ends the task in bounded time, as the world's outcome with
  its reason, and a tool past its time limit is the world's failure, not the verifier's;
* a remote server whose tools changed since they were accepted is an infrastructure outcome, said on the
  campaign page and the server's page, until staff accept the new schema; then the same rounds pass;
* an OpenEnv world's own reward needs no second check, and an episode the environment ended is not flagged
  for disagreeing with an answer the model never gave.
"""

import json
from pathlib import Path

import pytest
from django.test import Client

from calibration.models import Calibration, Campaign, Outcome, Rollout
from curation.imports import ImportRejected
from curation.mcp_servers import environment_use_mcp_server, mcp_server_register
from curation.models import McpServer, TaskVersion
from curation.services import environment_create
from engine.episodes import plugins
from tests.calibration.mcp_tasks import mcp_task
from tests.calibration.mcp_tasks import oracle as mcp_oracle
from tests.calibration.openenv_tasks import SEEDS, openenv_task
from tests.calibration.openenv_tasks import oracle as openenv_oracle
from tests.factories import import_tasks
from tests.support.mcp_kv_server import free_port, serve_mcp_kv
from tests.support.openai_server import OpenAITestServer
from tests.support.openenv_template_server import serve_openenv_template
from tests.support.server_campaigns import WORKER_ENV, start_campaign, wait_done
from tests.support.workers import flush_broker, running_worker, wait_for

pytestmark = pytest.mark.workers

ROOT = Path(__file__).resolve().parents[2]
COUNTER = "tests.engine.episodes.broken_plugins.counter"


def counter_distribution(site: Path) -> Path:
    """A distribution on `site` declaring the test plug-in `counter` under the entry point group, the way an
    installed package does (its dist-info): seen by this process and by a worker whose path holds `site`."""
    info = site / "passband_test_counter-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: passband-test-counter\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{plugins.GROUP}]\ncounter = {COUNTER}\n")
    return site


@pytest.fixture
def counter_installed(tmp_path, monkeypatch):
    site = counter_distribution(tmp_path / "site")
    monkeypatch.syspath_prepend(str(site))
    plugins.refresh()
    yield {"PYTHONPATH": f"{site}:{ROOT}", **WORKER_ENV}
    plugins.refresh()


def staff_client(django_user_model):
    staff = django_user_model.objects.create_user("world-staff", is_staff=True, is_superuser=True)
    client = Client()
    client.force_login(staff)
    return client


def campaign_page(client, campaign) -> str:
    return client.get(f"/campaigns/{campaign.pk}/").content.decode()


# -- only offered tools run ---------------------------------------------------------------------------


def booking_task():
    """Book a loss of an order's quantity with adjust_stock: the task offers find_items and adjust_stock. Its
    check (one movement of -quantity for the sku) is also met by ship_order, a tool of the same package that
    the task does not offer: the shortcut a policy searching for reward finds."""
    from passband_inventory import TOOL_SCHEMAS, reset, snapshot

    state = snapshot(reset(11))
    stock = {row["sku"]: row["stock"] for row in state["items"]}
    order = next(row for row in state["orders"] if stock[row["sku"]] >= row["quantity"])
    offered = [schema for schema in TOOL_SCHEMAS if schema["function"]["name"] in ("find_items", "adjust_stock")]
    calls = [
        {"name": "adjust_stock", "arguments": {"sku": order["sku"], "delta": -order["quantity"], "reason": "loss"}}
    ]
    task = {
        "key": "book-loss",
        "prompt": [{"role": "user", "content": f"Book a loss of {order['quantity']} units of {order['sku']}."}],
        "answer": json.dumps(calls),
        "verifier": {
            "kind": "state_check",
            "environment": "inventory",
            "seed": 11,
            "checks": [{"check": "stock_moved", "arguments": {"sku": order["sku"], "delta": -order["quantity"]}}],
        },
        "tools": offered,
        "domain": "workflow",
    }
    return task, order


@pytest.mark.django_db(transaction=True)
def test_a_tool_the_task_does_not_offer_never_runs_and_is_never_paid(alice, tmp_path):
    task, order = booking_task()
    environment = environment_create(name="warehouse-losses", domain="workflow")
    report = import_tasks(environment, alice, task, run_audits=True)
    assert report.ok and not report.audit_failures, report.summary()
    version = TaskVersion.objects.get(task__environment=environment)
    # The audit tried the reference answer with each of the package's tools the task does not offer: none paid.
    assert version.gameable is False and version.gameability_findings == []

    def shortcut(prompt_text, seed):
        if "<tool>" in prompt_text:
            return "Booked."
        return f"<tool_call>{json.dumps({'name': 'ship_order', 'arguments': {'id': order['id']}})}</tool_call>"

    flush_broker()
    with (
        OpenAITestServer(respond=shortcut, tool_parser=True) as model_server,
        running_worker(extra_env=WORKER_ENV, log_path=tmp_path / "worker.log"),
    ):
        campaign = start_campaign(environment, alice, model_server.base_url, "shortcut")
        wait_done(campaign, "the shortcut policy's campaign")
    rollouts = list(Rollout.objects.filter(campaign=campaign))
    assert len(rollouts) == 2
    for rollout in rollouts:
        assert rollout.outcome == Outcome.FAIL, rollout.detail
        (observation,) = rollout.episode["turns"][0]["observations"]
        assert observation["status"] == "unknown_tool"
        assert "does not offer the tool 'ship_order'" in observation["content"]
        assert rollout.episode["counts"]["not_offered"] == 1
        assert rollout.episode["offered_tools"] == ["adjust_stock", "find_items"]
        # It never ran: the order is still open and nothing moved.
        final = rollout.episode["final_state"]
        assert {row["status"] for row in final["orders"]} == {"open"} and final["movements"] == []


# -- world failures are the world's ------------------------------------------------------------------


def counter_task(key: str, *, seed: int, tools: tuple[str, ...]) -> dict:
    from tests.engine.episodes.broken_plugins.counter import TOOL_SCHEMAS

    return {
        "key": key,
        "prompt": [{"role": "user", "content": f"{key}: add 1 to the counter."}],
        "tools": [schema for schema in TOOL_SCHEMAS if schema["function"]["name"] in tools],
        "verifier": {
            "kind": "state_check",
            "environment": "counter",
            "seed": seed,
            "checks": [{"table": "counters", "where": {"id": 1}, "expect": {"value": seed + 1}}],
        },
        "answer": '[{"name": "add", "arguments": {"amount": 1}}]',
    }


@pytest.mark.django_db(transaction=True)
def test_a_world_that_cannot_reset_and_a_tool_past_its_limit_end_their_tasks_as_the_worlds(
    alice, counter_installed, django_user_model, tmp_path
):
    environment = environment_create(name="counting", domain="workflow")
    # The import refuses a task whose world cannot reset from its seed, naming the line and the field.
    with pytest.raises(ImportRejected) as refused:
        import_tasks(environment, alice, counter_task("never", seed=13, tools=("add",)))
    (problem,) = refused.value.report.problems
    assert (problem.line, problem.field) == (1, "verifier.seed")
    assert "could not reset from seed 13" in problem.reason and "no world for seed 13" in problem.reason
    report = import_tasks(
        environment,
        alice,
        counter_task("resets-later", seed=0, tools=("add",)),
        counter_task("spins", seed=0, tools=("add", "spin")),
    )
    assert report.ok, report.summary()
    # A new release of the plug-in stopped resetting from the first task's seed after it was imported.
    version = TaskVersion.objects.get(task__key="resets-later")
    TaskVersion.objects.filter(pk=version.pk).update(verifier={**version.verifier, "seed": 13})

    def spinner(prompt_text, seed):
        assert "resets-later" not in prompt_text, "the model was asked about a world that is not there"
        return '<tool_call>{"name": "spin", "arguments": {}}</tool_call>'

    flush_broker()
    with (
        OpenAITestServer(respond=spinner, tool_parser=True) as model_server,
        running_worker(extra_env=counter_installed, log_path=tmp_path / "worker.log"),
    ):
        campaign = start_campaign(environment, alice, model_server.base_url, "spinner")
        wait_done(campaign, "the campaign whose worlds fail")
    by_task = {}
    for rollout in Rollout.objects.filter(campaign=campaign).select_related("task_version__task"):
        by_task.setdefault(rollout.task_version.task.key, []).append(rollout)
    assert sorted(by_task) == ["resets-later", "spins"]
    for key, named in (("resets-later", "world counter: "), ("spins", "tool spin (world counter)")):
        rollouts = by_task[key]
        assert len(rollouts) == 2 and {rollout.outcome for rollout in rollouts} == {Outcome.WORLD_ERROR}
        assert all(rollout.detail.startswith(named) and rollout.reward is None for rollout in rollouts), key
    assert "no world for seed 13" in by_task["resets-later"][0].detail
    assert "tried 3 times" in by_task["resets-later"][0].detail
    for calibration in Calibration.objects.filter(task_version__task__environment=environment):
        assert calibration.attempts == 0 and calibration.verifier_errors == 0
        assert "world_failure" in calibration.flags
    page = campaign_page(staff_client(django_user_model), campaign)
    assert "0 verifier errors" in page and "4 world failures" in page
    assert 'id="campaign-world-failures"' in page and "Waiting for the model server" not in page


# -- a changed remote world waits for staff ------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_changed_mcp_schema_waits_as_infrastructure_until_staff_accept_it(alice, django_user_model, tmp_path):
    port = free_port()
    with serve_mcp_kv(port=port) as url:
        server = mcp_server_register(name="kv", url=url, timeout_s=10, max_sessions=4)
    environment = environment_create(name="kv-release", domain="tool use")
    environment_use_mcp_server(environment=environment, server=server)
    report = import_tasks(environment, alice, mcp_task("sum-store"), run_audits=True)
    assert report.ok and not report.audit_failures
    staff = staff_client(django_user_model)
    flush_broker()
    # The server comes back as a new release whose put takes `text`, not `value`: the oracle's calls would fail.
    with (
        serve_mcp_kv(port=port, renamed_argument=True),
        OpenAITestServer(respond=mcp_oracle, tool_parser=True) as model_server,
        running_worker(extra_env=WORKER_ENV, log_path=tmp_path / "worker.log"),
    ):
        campaign = start_campaign(environment, alice, model_server.base_url, "oracle")
        wait_for(
            lambda: "changed since they were accepted" in Campaign.objects.get(pk=campaign.pk).server_error,
            timeout=120,
            what="the campaign to wait on the changed tools",
        )
        assert not Rollout.objects.filter(campaign=campaign).exists()
        changed = "tool put: argument value removed; argument text added"
        assert changed in campaign_page(staff, campaign)
        assert changed in staff.get("/mcp-servers/").content.decode()
        # Staff accept the new schema; the rollouts waiting run on it (the oracle sends `value`: told so).
        # The page only queues it: a worker lists the tools (a web request never waits on an outside server).
        staff.post(f"/mcp-servers/{server.name}/accept-tools/")
        wait_for(
            lambda: McpServer.objects.get(pk=server.pk).tools_accepted_at is not None,
            timeout=60,
            what="a worker to accept the new tools",
        )
        server.refresh_from_db()
        assert server.tools_changed == "" and server.tools_accepted_at is not None
        assert {"key", "text"} == set(next(t for t in server.tools if t["name"] == "put")["parameters"]["properties"])
        wait_done(campaign, "the campaign after the schema was accepted")
    rollouts = list(Rollout.objects.filter(campaign=campaign))
    assert len(rollouts) == 2 and all(rollout.outcome in (Outcome.PASS, Outcome.FAIL) for rollout in rollouts)
    assert McpServer.objects.get(pk=server.pk).tools_changed == ""


@pytest.mark.django_db(transaction=True)
def test_an_openenv_reward_needs_no_check_and_an_ended_episode_is_not_flagged(alice, tmp_path):
    with serve_openenv_template(tmp_path / "openenv") as url:
        server = mcp_server_register(name="echo", url=url, protocol="openenv", timeout_s=10, max_sessions=4)
        environment = environment_create(name="echo-checked", domain="tool use")
        environment_use_mcp_server(environment=environment, server=server)
        unchecked = openenv_task(SEEDS[0])
        checked = {
            **openenv_task(SEEDS[1]),
            "verifier": {**openenv_task(SEEDS[1])["verifier"], "check": {"kind": "exact"}},
        }
        # The world's own reward is imported with the audits run, without a second check.
        report = import_tasks(environment, alice, unchecked, checked, run_audits=True)
        assert report.ok and not report.audit_failures, report.summary()
        flush_broker()
        with (
            OpenAITestServer(respond=openenv_oracle, tool_parser=True) as model_server,
            running_worker(extra_env=WORKER_ENV, log_path=tmp_path / "worker.log"),
        ):
            campaign = start_campaign(environment, alice, model_server.base_url, "oracle")
            wait_done(campaign, "the OpenEnv oracle's campaign")
    rollouts = list(Rollout.objects.filter(campaign=campaign).select_related("task_version__task"))
    assert len(rollouts) == 2 * 2 and {rollout.outcome for rollout in rollouts} == {Outcome.PASS}
    for rollout in rollouts:
        # The environment said done after the step: the model had no last turn, so nothing disagreed.
        assert rollout.episode["stop_reason"] == "done" and "flags" not in rollout.episode
        assert not rollout.detail.startswith("rewards disagree")
    compared = [rollout for rollout in rollouts if rollout.task_version.task.key == checked["key"]]
    assert all("not compared" in rollout.detail for rollout in compared)
