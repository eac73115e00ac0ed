"""An environment's page says where its tool worlds come from (plug-in, package, version) and lists their
tools and a plug-in's own packages (its lock: versions, hash prefixes, whether installed on this host); a task
naming a plug-in that is not installed gets an error that lists the installed ones."""

import io

import pytest
from django.urls import reverse

from curation.models import Task, TaskVersion
from curation.services import environment_create
from engine.episodes import plugin_packages, plugins
from engine.episodes.backoffice_tasks import backoffice_tasks
from tests.factories import import_tasks
from tests.support.plugin_packages import example_installed, offline_packages_env

pytestmark = pytest.mark.django_db


def inventory_tasks():
    from passband_inventory.tasks import inventory_tasks as tasks  # the installed out-of-tree package

    return tasks()


@pytest.fixture
def workflows(alice):
    environment = environment_create(name="workflows", domain="workflow", description="Tool tasks.")
    report = import_tasks(environment, alice, *inventory_tasks()[:2], next(iter(backoffice_tasks(per_template=1))))
    assert report.ok, report.problems
    return environment


def test_the_page_shows_each_plugin_its_origin_and_its_tools(client, alice, workflows):
    client.force_login(alice)
    page = client.get(reverse("environment_detail", args=["workflows"])).content.decode()
    assert 'id="world-inventory"' in page and 'id="world-backoffice"' in page
    assert "Plug-in <strong>inventory</strong> from package <strong>passband-example-env</strong> 0.3.1" in page
    assert "module <code>passband_inventory</code> · 2 tasks" in page
    assert "Plug-in <strong>backoffice</strong> from package <strong>passband</strong> 0.1.0" in page
    assert "<code>ship_order</code>" in page and "<code>submit_expense_report</code>" in page
    assert '<code>sku</code>* <span class="muted">string</span>' in page  # adjust_stock's required argument
    assert "state checks no_negative_stock, stock_moved" in page
    assert "not available" not in page


def test_a_task_naming_a_missing_plugin_says_what_is_installed(client, alice, workflows):
    # A plug-in uninstalled after its tasks were imported: the stored verifier still names it.
    task = Task.objects.filter(environment=workflows).first()
    version = task.current_version
    TaskVersion.objects.filter(pk=version.pk).update(verifier={**version.verifier, "environment": "warehouse"})
    client.force_login(alice)
    page = client.get(reverse("environment_detail", args=["workflows"])).content.decode()
    assert 'id="world-warehouse"' in page and "not available" in page
    assert "unknown tool environment &#x27;warehouse&#x27;; installed plug-ins: backoffice (passband 0.1.0), " in page
    assert "inventory (passband-example-env 0.3.1)" in page


def test_an_environment_without_tools_says_so(client, alice):
    environment_create(name="sums", domain="math", default_verifier={"kind": "math"})
    client.force_login(alice)
    page = client.get(reverse("environment_detail", args=["sums"])).content.decode()
    assert "No tool environment" in page


def test_counts_only_the_tasks_the_reader_may_see(client, alice, workflows, django_user_model):
    from tests.conftest import make_user

    dora = make_user(django_user_model, "dora", "authors")  # another author: alice's drafts are hidden
    client.force_login(dora)
    page = client.get(reverse("environment_detail", args=["workflows"])).content.decode()
    assert "module <code>passband_inventory</code> · 0 tasks" not in page  # no world is shown for unseen tasks
    assert 'id="world-inventory"' not in page


def test_the_list_links_to_the_page(client, alice, workflows):
    client.force_login(alice)
    page = client.get(reverse("environment_list")).content.decode()
    assert reverse("environment_detail", args=["workflows"]) in page


def test_the_page_shows_each_worlds_health_over_the_last_hour(client, alice, workflows):
    from calibration.services.health import EpisodeAttempt, episode_health_record

    ran = {"reset_ms": 30.0, "counts": {"tool_calls": 4, "ok": 3, "tool_error": 1}}
    episode_health_record(
        environment=workflows,
        world="inventory",
        attempts=[EpisodeAttempt(transcript=ran)] * 3 + [EpisodeAttempt(failure="inventory could not reset: boom")],
    )
    client.force_login(alice)
    page = client.get(reverse("environment_detail", args=["workflows"])).content.decode()
    row = page[page.index('id="health-inventory"') :]
    row = row[: row.index("</tr>")]
    # 4 episodes, 1 failed by the world (25%); 12 tool calls, 3 crashed (25%); resets 30 ms on average and at worst.
    assert [cell.split(">", 1)[1].strip() for cell in row.split("<td")[1:]][:6] == [
        "<code>inventory</code></td>",
        "4</td>",
        "1 (25%)</td>",
        "12</td>",
        "3 (25%)</td>",
        "30 / 30 ms</td>",
    ]
    assert "Last failure: inventory could not reset: boom" in page


def test_an_environment_with_no_episodes_lately_says_so(client, alice, workflows):
    client.force_login(alice)
    page = client.get(reverse("environment_detail", args=["workflows"])).content.decode()
    assert "No episode ran in this environment in the last 1 hour." in page


def test_bands_per_probe_model_count_the_tasks_the_reader_may_see(client, alice, workflows, django_user_model):
    from calibration.models import Calibration
    from calibration.services import probe_model_add
    from tests.conftest import make_user

    probe = probe_model_add(name="probe-a", backend="openai", base_url="http://127.0.0.1:9/v1", model="a")
    versions = [task.current_version for task in Task.objects.filter(environment=workflows).order_by("pk")]
    for version, band in zip(versions, ["in_band", "in_band", "too_hard"]):
        Calibration.objects.create(task_version=version, probe_model=probe, band=band)
    client.force_login(alice)
    page = client.get(reverse("environment_detail", args=["workflows"])).content.decode()
    table = page[page.index('id="bands-probe-a"') : page.index("</table>", page.index('id="bands-probe-a"'))]
    assert "3 tasks calibrated" in table
    cells = [cell.split("</a>")[0].rsplit(">", 1)[1] for cell in table.split("<td>")[1:]]
    assert cells == ["0", "1", "2", "0", "0"]  # undecided, too hard, in band, retire, borderline
    assert "model=probe-a&amp;band=in_band" in table
    dora = make_user(django_user_model, "dora", "authors")  # alice's drafts are hidden from her
    client.force_login(dora)
    page = client.get(reverse("environment_detail", args=["workflows"])).content.decode()
    assert 'id="bands-probe-a"' not in page and "No task of this environment is calibrated yet" in page


def test_an_mcp_environment_shows_its_server_and_tools(client, alice):
    from curation.models import Environment, McpServer

    server = McpServer.objects.create(
        name="kv",
        url="http://tools:8000/mcp",
        max_sessions=4,
        tools=[{"name": "put", "description": "Store a value."}, {"name": "grade", "hidden": True}],
    )
    environment_create(name="kv-tasks", domain="tool use")
    Environment.objects.filter(name="kv-tasks").update(kind=Environment.Kind.MCP, mcp_server=server)
    client.force_login(alice)
    page = client.get(reverse("environment_detail", args=["kv-tasks"])).content.decode()
    assert "Server <strong>kv</strong> at <code>http://tools:8000/mcp</code> · at most 4 sessions at once" in page
    assert "<code>put</code></td><td>Store a value.</td>" in page
    assert '<code>grade</code> <span class="muted">(the reward tool, hidden from the model)</span>' in page
    Environment.objects.filter(name="kv-tasks").update(mcp_server=None)
    page = client.get(reverse("environment_detail", args=["kv-tasks"])).content.decode()
    assert "runs on a remote server, but none is set" in page


def test_tasks_from_reasoning_gym_show_their_generator_and_package(client, alice):
    from importlib import metadata

    from django.core.management import call_command

    for generator in ("basic_arithmetic", "word_sorting"):
        call_command(
            "import_reasoning_gym",
            generator,
            environment="rg",
            create=True,
            owner="alice",
            size=2,
            stdout=io.StringIO(),
        )
    client.force_login(alice)
    page = client.get(reverse("environment_detail", args=["rg"])).content.decode()
    table = page[page.index('id="task-sources"') :]
    rows = [row for row in table[: table.index("</tbody>")].split("<tr>")[2:]]
    version = metadata.version("reasoning-gym")
    assert [" ".join(cell.split()) for cell in rows] == [
        f"<td><code>reasoning_gym</code></td><td><code>basic_arithmetic</code></td> <td>reasoning-gym {version}</td> <td>2</td></tr>",
        f"<td><code>reasoning_gym</code></td><td><code>word_sorting</code></td> <td>reasoning-gym {version}</td> <td>2</td></tr>",
    ]


def test_tasks_from_a_verifiers_taskset_show_the_taskset_and_its_package(client, alice, tmp_path):
    import json
    from importlib import metadata

    from django.core.management import call_command

    mapping = tmp_path / "mapping.json"
    mapping.write_text(
        json.dumps(
            {"prompt": "{prompt}", "answer_column": "solution", "answer_extractor": "after_hashes", "key_column": "key"}
        )
    )
    call_command(
        "import_verifiers",
        "vf-word-arithmetic",
        environment="wa",
        create=True,
        owner="alice",
        mapping_file=mapping,
        reference_format="\\boxed{{answer}}",
        limit=3,
        stdout=io.StringIO(),
    )
    client.force_login(alice)
    page = client.get(reverse("environment_detail", args=["wa"])).content.decode()
    table = page[page.index('id="task-sources"') : page.index("</table>", page.index('id="task-sources"'))]
    version = metadata.version("vf-word-arithmetic")
    assert "<td><code>verifiers_reward</code></td><td><code>vf-word-arithmetic</code></td>" in table
    assert f"vf-word-arithmetic {version}</td>" in " ".join(table.split()).replace(" </td>", "</td>")


@pytest.fixture
def sheet_installed(tmp_path, monkeypatch):
    """The example `sheet` plug-in (tests/plugins/passband-example-sheet, REQUIREMENTS = "requirements.lock")
    installed as a package is, its lock installable from the wheel beside it into a package cache of the test's."""
    for name, value in offline_packages_env(tmp_path / "package-cache").items():
        monkeypatch.setenv(name, value)
    example_installed(monkeypatch, tmp_path, "passband-example-sheet", {"sheet": "passband_sheet:SheetWorld"})
    yield plugins.get("sheet")
    plugins.refresh()


def test_a_plugins_own_packages_show_their_versions_hashes_and_whether_installed_here(client, alice, sheet_installed):
    checks = [{"table": "cells", "where": {"id": "B1"}, "expect": {"value": 42}}]
    verifier = {"kind": "state_check", "environment": "sheet", "seed": 1, "checks": checks}
    environment_create(name="sheets", domain="workflow", default_verifier=verifier)
    client.force_login(alice)
    page = client.get(reverse("environment_detail", args=["sheets"])).content.decode()
    assert 'id="world-sheet"' in page and 'id="lock-sheet"' in page
    assert (
        f'<code>requirements.lock</code> <span class="muted">sha256 {sheet_installed.lock.sha256[:12]}</span>' in page
    )
    # texttable, pinned to the sha256 of its wheel (tests/plugins/passband-example-sheet/passband_sheet/requirements.lock)
    assert "<tr><td><code>texttable</code></td><td>1.7.0</td><td><code>72227d592c82</code></td></tr>" in page
    assert "Its tools also use, from beside Passband: pandas." in page
    assert "not installed on this host yet" in page and "manage.py environments --install sheet" in page

    plugin_packages.install(sheet_installed)  # as a worker does on first use
    page = client.get(reverse("environment_detail", args=["sheets"])).content.decode()
    assert '<span class="status">installed on this host</span>' in page
    assert "not installed on this host yet" not in page and "--install" not in page
