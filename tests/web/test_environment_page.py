"""An environment's page says where its tool worlds come from (plug-in, package, version) and lists their
tools; a task naming a plug-in that is not installed gets an error that lists the installed ones."""

import pytest
from django.urls import reverse

from curation.models import Task, TaskVersion
from curation.services import environment_create
from engine.episodes.backoffice_tasks import backoffice_tasks
from tests.factories import import_tasks

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
