"""Only the tools a task offers run: in an episode (the runner refuses the call before the world sees it),
in a replayed completion (verify fails it before the replay), and the gameability audit tries one."""

import json

from engine import verifiers
from engine.episodes.offered import offered_names, unoffered_problem
from engine.verifiers.gameability import UNOFFERED_LABEL, _probe_run, gameability_check, unoffered_probes


def booking():
    """A task offering find_items and adjust_stock, whose check ship_order (not offered) also meets."""
    from passband_inventory import TOOL_SCHEMAS, reset, snapshot

    state = snapshot(reset(11))
    stock = {row["sku"]: row["stock"] for row in state["items"]}
    order = next(row for row in state["orders"] if stock[row["sku"]] >= row["quantity"])
    tools = [schema for schema in TOOL_SCHEMAS if schema["function"]["name"] in ("find_items", "adjust_stock")]
    verifier = {
        "kind": "state_check",
        "environment": "inventory",
        "seed": 11,
        "checks": [{"check": "stock_moved", "arguments": {"sku": order["sku"], "delta": -order["quantity"]}}],
    }
    answer = json.dumps(
        [{"name": "adjust_stock", "arguments": {"sku": order["sku"], "delta": -order["quantity"], "reason": "loss"}}]
    )
    shortcut = json.dumps([{"name": "ship_order", "arguments": {"id": order["id"]}}])
    return verifier, tools, answer, shortcut


def test_names_and_the_problem_of_a_completion_calling_an_unoffered_tool():
    verifier, tools, answer, shortcut = booking()
    assert offered_names(tools) == {"find_items", "adjust_stock"}
    assert unoffered_problem(answer, tools) == ""
    assert unoffered_problem(shortcut, tools).startswith("calls ship_order, which the task does not offer")
    # A task that lists no tools (an MCP task offered all of its server's) restricts nothing.
    assert unoffered_problem(shortcut, []) == ""


def test_a_replayed_call_to_an_unoffered_tool_is_never_paid():
    verifier, tools, answer, shortcut = booking()
    # Without the task's tools the replay would run ship_order, and it meets the check: the hole.
    assert verifiers.verify(verifier=verifier, completion=shortcut, answer=answer).outcome == "pass"
    refused = verifiers.verify(verifier=verifier, completion=shortcut, answer=answer, tools=tools)
    assert refused.outcome == "fail" and refused.reward == 0.0 and "does not offer" in refused.detail
    assert verifiers.verify(verifier=verifier, completion=answer, answer=answer, tools=tools).outcome == "pass"
    # The reference answer passes the audit with the tools; one that needs an unoffered tool does not.
    assert verifiers.audit(verifier=verifier, answer=answer, tools=tools) == []
    problems = verifiers.audit(verifier=verifier, answer=shortcut, tools=tools)
    assert problems and "ship_order, which the task does not offer" in problems[0]


def test_the_audit_tries_each_tool_the_task_does_not_offer_and_reports_one_that_pays():
    verifier, tools, answer, _ = booking()
    probes = unoffered_probes(verifiers._parse(verifier)[1], answer=answer, tools=tools)
    assert sorted(probe.label for probe in probes) == [
        f"{UNOFFERED_LABEL} ({name})" for name in ("get_order", "move_item", "ship_order")
    ]
    # Held: the reference answer with an unoffered call is not paid.
    assert gameability_check(verifier=verifier, answer=answer, prompt="Book a loss.", tools=tools) == []
    # Where the door is not held (the verdict not told what the task offers), the same probe is reported.
    module, config = verifiers._parse(verifier)
    finding = _probe_run(module, config, probes[0], answer=answer, prompt="Book a loss.")
    assert finding is not None and finding.label.startswith(UNOFFERED_LABEL) and finding.outcome == "pass"
