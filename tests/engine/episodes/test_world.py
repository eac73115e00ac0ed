"""The backoffice world: deterministic reset, tools, and the sandboxed copy of the same tools."""

import json

from engine.episodes import backoffice
from engine.episodes.world import LocalWorld, SandboxedWorld, initial_state


def test_same_seed_same_world_byte_for_byte():
    first, second = backoffice.reset(17), backoffice.reset(17)
    assert backoffice.snapshot(first) == backoffice.snapshot(second)
    assert backoffice.dump(first) == backoffice.dump(second)


def test_different_seeds_give_different_worlds():
    assert initial_state(environment="backoffice", seed=17) != initial_state(environment="backoffice", seed=18)


def test_world_has_every_table_filled():
    state = initial_state(environment="backoffice", seed=3)
    assert set(state) == set(backoffice.TABLES)
    assert all(state[table] for table in backoffice.TABLES)


def test_tools_search_read_create_update_and_submit():
    world = LocalWorld(environment="backoffice", seed=5)
    state = world.state()
    customer = state["customers"][0]
    found = world.call("search_records", {"table": "customers", "query": customer["name"].upper()})
    assert found.status == "ok" and json.loads(found.content)["rows"][0]["id"] == customer["id"]
    created = world.call(
        "create_record",
        {"table": "contacts", "fields": {"customer_id": customer["id"], "name": "Ada Lee", "email": "ada@x.example"}},
    )
    assert created.status == "ok"
    new_id = json.loads(created.content)["id"]
    assert world.call("update_record", {"table": "contacts", "id": new_id, "fields": {"title": "CTO"}}).status == "ok"
    record = json.loads(world.call("get_record", {"table": "contacts", "id": new_id}).content)
    assert record["title"] == "CTO" and record["customer_id"] == customer["id"]
    employee = state["employees"][0]["name"]
    submitted = world.call(
        "submit_expense_report",
        {"employee": employee, "title": "Trip", "items": [{"category": "taxi", "amount": 12.5}]},
    )
    assert submitted.status == "ok"
    report_id = json.loads(submitted.content)["submitted"]
    report = json.loads(world.call("get_record", {"table": "expense_reports", "id": report_id}).content)
    assert report["total"] == 12.5 and report["items"][0]["category"] == "taxi"


def test_refused_calls_are_observations_and_change_nothing():
    world = LocalWorld(environment="backoffice", seed=5)
    before = world.state()
    assert world.call("drop_table", {}).status == "unknown_tool"
    assert world.call("update_record", {"table": "deals", "id": 1}).status == "bad_arguments"  # no fields
    assert world.call("update_record", {"table": "deals", "id": 1, "fields": {"stage": "closed"}}).status == (
        "bad_arguments"
    )
    assert world.call("update_record", {"table": "policies", "id": 1, "fields": {"limit_amount": 1e6}}).status == (
        "bad_arguments"
    )
    assert world.call("get_record", {"table": "deals", "id": 999}).status == "bad_arguments"
    assert world.call("search_records", {"table": "deals", "filters": {"id; DROP TABLE deals": 1}}).status == (
        "bad_arguments"
    )
    assert world.call("get_record", ["deals", 1]).status == "bad_arguments"
    assert world.state() == before


def test_sandboxed_world_matches_the_local_world():
    calls = [
        ("update_record", {"table": "deals", "id": 2, "fields": {"stage": "won"}}),
        (
            "create_record",
            {"table": "deals", "fields": {"customer_id": 1, "title": "X", "amount": 5, "close_date": "2027-01-01"}},
        ),
        ("nope", {}),
    ]
    local, sandboxed = LocalWorld(environment="backoffice", seed=9), SandboxedWorld(environment="backoffice", seed=9)
    for name, arguments in calls:
        assert local.call(name, arguments).status == sandboxed.call(name, arguments).status
    assert sandboxed.state() == local.state()


def test_a_stuck_tool_is_a_timeout():
    world = SandboxedWorld(environment="backoffice", seed=9, tool_seconds=1)
    world._source = "while True:\n    pass\n"  # stands for a tool that never returns
    result = world.call("get_record", {"table": "deals", "id": 1})
    assert result.status == "timeout"
