"""A tool task's tools are checked at import against its environment plug-in: valid function schemas, and
tools the plug-in has; each problem names the line, the field and what to fix."""

import copy

import pytest

from curation.imports import ImportRejected
from curation.services import environment_create
from tests.factories import import_tasks

pytestmark = pytest.mark.django_db


def inventory_task():
    from passband_inventory.tasks import inventory_tasks  # the installed out-of-tree package

    return copy.deepcopy(inventory_tasks()[0])


@pytest.fixture
def warehouse(db):
    return environment_create(name="warehouse", domain="workflow")


def problems(environment, owner, task):
    with pytest.raises(ImportRejected) as rejected:
        import_tasks(environment, owner, task)
    return [(problem.line, problem.field, problem.reason) for problem in rejected.value.report.problems]


def test_a_valid_tool_task_imports_and_passes_its_audit(warehouse, alice):
    report = import_tasks(warehouse, alice, inventory_task(), run_audits=True)
    assert report.ok and report.created == ["inventory-ship-11"] and report.audit_failures == []


def test_an_invalid_tool_schema_says_what_to_fix(warehouse, alice):
    task = inventory_task()
    task["tools"][1]["function"]["parameters"] = {"type": "object", "properties": {"id": {"type": "int"}}}
    [(line, field, reason)] = problems(warehouse, alice, task)
    assert (line, field) == (1, "tools")
    assert reason.startswith("tool 1 (get_order): function.parameters is not a valid JSON Schema at properties/id/type")


def test_a_tool_the_plugin_does_not_have_is_refused_with_its_tools(warehouse, alice):
    task = inventory_task()
    task["tools"].append(
        {"type": "function", "function": {"name": "delete_warehouse", "parameters": {"type": "object"}}}
    )
    [(_, field, reason)] = problems(warehouse, alice, task)
    assert field == "tools"
    assert reason == (
        "tool 5 (delete_warehouse) is not a tool of environment inventory, whose tools are find_items, get_order, "
        "adjust_stock, ship_order, move_item: copy their schemas from the environment's page or `manage.py environments`"
    )


def test_an_unknown_plugin_is_a_verifier_problem_listing_the_installed_ones(warehouse, alice):
    task = inventory_task()
    task["verifier"]["environment"] = "warehouse"
    [(_, field, reason)] = problems(warehouse, alice, task)
    assert field == "verifier"
    assert "unknown tool environment 'warehouse'; installed plug-ins: backoffice (passband 0.1.0), inventory" in reason
