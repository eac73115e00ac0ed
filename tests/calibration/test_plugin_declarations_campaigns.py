"""An installed package's import never runs in a worker or web process, through a real Celery worker: the hostile
package of tests/support/hostile_import.py, whose module-level code reads the importing process's secrets, writes
a marker file, opens a socket, starts a process and marks the importing interpreter, is declared as a world
provider and a verifier kind by a dist-info on a folder of its own, as installing it would; so is the hostile tool
environment of tests/support/hostile_tool_environment.py (read SECRET_KEY, write a marker, mark the interpreter),
whose declaration is read in a helper and whose functions run in its sandbox. The worker runs a
campaign of its tasks (an episode in its world, a prompt scored by its kind) and this process (the web process)
imports them, shows the environment page and runs manage.py environments: both list the package's provider and
kind, its hooks work, and what its import attempted was refused in the helpers where it ran."""

import builtins
import json
import os
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.urls import reverse

from calibration.models import Outcome, Rollout
from curation.services import environment_create
from engine import declarations
from engine.episodes import plugins
from engine.verifiers import registry as kinds
from engine.worlds import registry as worlds
from tests.calibration.scripted import observed_tools, probe_through_a_worker
from tests.factories import import_tasks
from tests.support.hostile_environment_names import HOSTILE_TOOL_ENVIRONMENT as TOOL_ENVIRONMENT
from tests.support.hostile_environment_names import TOOL_MARK, TOOL_MARKER
from tests.support.workers import flush_broker, running_worker, test_database_url

pytestmark = pytest.mark.workers

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = "tests.support.hostile_import"
MARKER = "/tmp/passband-hostile-import-ran"
MARK = "__passband_hostile_import_ran_in__"
REFUSED_EVERYWHERE = "secret:none parent:refused write:refused socket:refused process:refused"


def forget_registries():
    kinds.refresh()
    worlds.refresh()
    plugins.refresh()
    declarations.forget()


@pytest.fixture
def hostile_installed(tmp_path, monkeypatch):
    site = tmp_path / "site"
    info = site / "passband_hostile_import-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: passband-hostile-import\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(
        f"[{worlds.GROUP}]\nhostile-import = {HOSTILE}:PROVIDER\nhostile-tool-env = {TOOL_ENVIRONMENT}\n\n"
        f"[{kinds.GROUP}]\nhostile_import = {HOSTILE}:KIND\n"
    )
    monkeypatch.syspath_prepend(str(site))
    for marker in (MARKER, TOOL_MARKER):
        if os.path.exists(marker):
            os.remove(marker)
    forget_registries()
    yield {"PYTHONPATH": f"{site}:{ROOT}"}
    forget_registries()


def never_imported_here():
    assert HOSTILE not in sys.modules and not hasattr(builtins, MARK)
    assert not os.path.exists(MARKER)  # nothing that imported it, worker, web or helper, could leave its mark
    # The tool environment: read in a helper, run in its sandbox (whose /tmp is its own), never imported here.
    assert TOOL_ENVIRONMENT not in sys.modules and not hasattr(builtins, TOOL_MARK)
    assert not os.path.exists(TOOL_MARKER)


TASKS = [
    {
        "key": "episode",
        "prompt": [{"role": "user", "content": "[episode] Report, then say done."}],
        "answer": json.dumps([{"name": "import_report", "arguments": {}}]),
        "tools": [{"type": "function", "function": {"name": "import_report", "parameters": {"type": "object"}}}],
        "verifier": {"kind": "episode_reward", "reward": "environment", "seed": 1},
    },
    {"key": "plain", "prompt": "[plain] Say ok.", "answer": "ok", "verifier": {"kind": "hostile_import"}},
    {
        "key": "toolenv",
        "prompt": [{"role": "user", "content": "[toolenv] Report, then say done."}],
        "answer": json.dumps([{"name": "tool_environment_report", "arguments": {}}]),
        "tools": [
            {"type": "function", "function": {"name": "tool_environment_report", "parameters": {"type": "object"}}}
        ],
        "verifier": {
            "kind": "state_check",
            "environment": "hostile-tool-env",
            "seed": 1,
            "checks": [{"check": "reported"}, {"table": "reports", "count": 1}],
        },
    },
]


def policy(prompt_text, seed):
    if "[plain]" in prompt_text:
        return "ok"
    if prompt_text.count("<assistant>") > 1:
        return "Done."
    if "[toolenv]" in prompt_text:
        return '<tool_call>{"name": "tool_environment_report", "arguments": {}}</tool_call>'
    return '<tool_call>{"name": "import_report", "arguments": {}}</tool_call>'


@pytest.mark.django_db(transaction=True)
def test_a_hostile_packages_import_runs_in_no_worker_or_web_process(hostile_installed, alice, client):
    environment = environment_create(name="hostile-import-tasks", domain="workflow")
    assert import_tasks(environment, alice, *TASKS).ok  # the kind's config checked by its helper, from here
    flush_broker()
    with running_worker(queues="default,generate,verify", concurrency=1, extra_env=hostile_installed):
        _, campaign = probe_through_a_worker(
            environment, alice, policy, "hostile-import", rollouts=2, tool_parser=True, max_new_tokens=1000
        )

    rollouts = {key: [] for key in ("episode", "plain", "toolenv")}
    for rollout in Rollout.objects.filter(campaign=campaign).select_related("task_version__task"):
        rollouts[rollout.task_version.task.key].append(rollout)
    assert all(len(found) == 2 for found in rollouts.values()), rollouts
    secrets = [settings.SECRET_KEY, test_database_url(), settings.CELERY_BROKER_URL]
    for rollout in rollouts["episode"]:  # its provider, claimed and served in the worker's helpers
        assert rollout.outcome == Outcome.PASS, rollout.detail
        report = json.loads(observed_tools(rollout)["import_report"])
        assert report["secret_key"] == "" and set(report["environ"].split(",")) <= {"", "LC_CTYPE"}
        assert all(
            report[attempt].startswith("refused: Forbidden") for attempt in ("parent", "write", "socket", "process")
        )
        assert not [secret for secret in secrets if secret in json.dumps(rollout.episode)]
    for rollout in rollouts["plain"]:  # its kind, scored in the worker's helpers
        assert (rollout.outcome, rollout.detail) == (Outcome.PASS, REFUSED_EVERYWHERE)
    for rollout in rollouts["toolenv"]:  # the tool environment: its tools and STATE_CHECKS run in its sandbox
        assert rollout.outcome == Outcome.PASS, rollout.detail
        report = json.loads(observed_tools(rollout)["tool_environment_report"])
        assert report["secret_key"] == ""
        assert not [secret for secret in secrets if secret in json.dumps(rollout.episode)]
    never_imported_here()

    # The web process: the environment page and manage.py environments list the package, never importing it.
    client.force_login(alice)
    assert client.get(reverse("environment_detail", args=[environment.name])).status_code == 200
    out = StringIO()
    call_command("environments", stdout=out)
    lines = out.getvalue().splitlines()
    assert f"  hostile_import  (installed: passband-hostile-import 0.1.0, {HOSTILE}:KIND)" in lines
    assert f"  hostile-import  (installed: passband-hostile-import 0.1.0, {HOSTILE}:PROVIDER)" in lines
    assert f"hostile-tool-env  (installed: passband-hostile-import 0.1.0, module {TOOL_ENVIRONMENT})" in out.getvalue()
    out = StringIO()
    call_command("environments", "--check", "hostile-tool-env", stdout=out)  # its functions, run in its sandbox
    assert "check: ok" in out.getvalue(), out.getvalue()
    never_imported_here()
