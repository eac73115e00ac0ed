"""The demo tasks of the `backoffice` environment, in the task import format.

Eleven templates over four levels, three tasks each (33): level 1 changes a record named by id
(one call); level 2 finds a record by name, then changes it or adds one next to it; level 3
changes several records (a churned customer, a departing account manager, a new deal); level 4
applies the expense policy (file a report with amounts capped at the limits; approve or reject a
report). Every task has its own world seed, and its reference answer is the list of tool calls
that solves it, which the `state_check` verifier replays during the task audit.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from typing import Any

from engine.episodes import backoffice
from engine.episodes.world import LocalWorld

SYSTEM_PROMPT = (
    "You are the back-office assistant of Passband Corp. Use the tools to look up and change records in the "
    "company database. Make only the changes the request asks for. When the request is done, reply with one "
    "short sentence and no tool call."
)
TASKS_PER_TEMPLATE = 3
FIRST_SEED = 100

State = dict[str, list[dict[str, Any]]]
Template = Callable[[State, random.Random], tuple[str, list[dict[str, Any]], list[dict[str, Any]]]]


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def _customer(state: State, customer_id: int) -> dict[str, Any]:
    return next(row for row in state["customers"] if row["id"] == customer_id)


def _limits(state: State) -> dict[str, float]:
    return {row["category"]: row["limit_amount"] for row in state["policies"]}


# Level 1: the record is named by id.


def deal_stage_by_id(state: State, rng: random.Random):
    deal = rng.choice([row for row in state["deals"] if row["stage"] in ("prospect", "negotiation")])
    stage = rng.choice(("won", "lost"))
    prompt = f"Set the stage of deal #{deal['id']} to {stage}."
    calls = [_call("update_record", table="deals", id=deal["id"], fields={"stage": stage})]
    checks = [
        {"table": "deals", "where": {"id": deal["id"]}, "expect": {"stage": stage, "amount": deal["amount"]}},
        {"unchanged": ["customers", "contacts"]},
    ]
    return prompt, calls, checks


def contact_phone_by_id(state: State, rng: random.Random):
    contact = rng.choice(state["contacts"])
    phone = f"+1-555-{rng.randint(1000, 9999)}"
    prompt = f"Contact #{contact['id']} has a new phone number, {phone}. Update the record."
    calls = [_call("update_record", table="contacts", id=contact["id"], fields={"phone": phone})]
    checks = [
        {"table": "contacts", "where": {"id": contact["id"]}, "expect": {"phone": phone, "email": contact["email"]}},
        {"unchanged": ["customers", "deals"]},
    ]
    return prompt, calls, checks


def customer_country_by_id(state: State, rng: random.Random):
    customer = rng.choice(state["customers"])
    country = rng.choice([c for c in backoffice.COUNTRIES if c != customer["country"]])
    prompt = f"Customer #{customer['id']} moved its headquarters to {country}. Update its country."
    calls = [_call("update_record", table="customers", id=customer["id"], fields={"country": country})]
    checks = [
        {
            "table": "customers",
            "where": {"id": customer["id"]},
            "expect": {"country": country, "name": customer["name"]},
        },
        {"unchanged": ["contacts", "deals"]},
    ]
    return prompt, calls, checks


# Level 2: find by name, then write.


def deal_won_by_name(state: State, rng: random.Random):
    deal = rng.choice([row for row in state["deals"] if row["stage"] in ("prospect", "negotiation")])
    customer = _customer(state, deal["customer_id"])
    prompt = f'{customer["name"]} signed the "{deal["title"]}" deal. Mark that deal as won.'
    calls = [_call("update_record", table="deals", id=deal["id"], fields={"stage": "won"})]
    checks = [
        {"table": "deals", "where": {"id": deal["id"]}, "expect": {"stage": "won"}},
        {
            "table": "deals",
            "where": {"stage": "won"},
            "count": sum(row["stage"] == "won" for row in state["deals"]) + 1,
        },
        {"unchanged": ["customers", "contacts"]},
    ]
    return prompt, calls, checks


def contact_email_by_name(state: State, rng: random.Random):
    contact = rng.choice(state["contacts"])
    email = contact["name"].lower().replace(" ", "_") + "@newmail.example"
    prompt = f"{contact['name']} changed email address to {email}. Update their contact record."
    calls = [_call("update_record", table="contacts", id=contact["id"], fields={"email": email})]
    checks = [
        {"table": "contacts", "where": {"id": contact["id"]}, "expect": {"email": email}},
        {"unchanged": ["customers", "deals"]},
    ]
    return prompt, calls, checks


def add_contact(state: State, rng: random.Random):
    customer = rng.choice(state["customers"])
    used = {row["name"] for row in state["contacts"]} | {row["name"] for row in state["employees"]}
    name = rng.choice(
        [
            f"{first} {last}"
            for first in backoffice.FIRST_NAMES
            for last in backoffice.LAST_NAMES
            if f"{first} {last}" not in used
        ]
    )
    title = rng.choice(backoffice.TITLES)
    email = name.lower().replace(" ", ".") + "@" + customer["name"].lower().replace(" ", "") + ".example"
    prompt = f"Add {name} ({title}, {email}) as a new contact of {customer['name']}."
    calls = [
        _call(
            "create_record",
            table="contacts",
            fields={"customer_id": customer["id"], "name": name, "email": email, "title": title},
        )
    ]
    checks = [
        {
            "table": "contacts",
            "where": {"customer_id": customer["id"], "name": name},
            "expect": {"email": email, "title": title},
        },
        {"table": "contacts", "count": len(state["contacts"]) + 1},
        {"unchanged": ["customers", "deals"]},
    ]
    return prompt, calls, checks


# Level 3: several records.


def new_deal(state: State, rng: random.Random):
    customer = rng.choice([row for row in state["customers"] if row["status"] == "active"])
    title = rng.choice(backoffice.PRODUCTS) + " 2027"
    amount = float(rng.randint(20, 400) * 250)
    close = f"2027-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    prompt = (
        f'Open a new deal for {customer["name"]}: "{title}", worth {amount:g}, expected to close on {close}. '
        "It starts in the prospect stage."
    )
    calls = [
        _call(
            "create_record",
            table="deals",
            fields={
                "customer_id": customer["id"],
                "title": title,
                "amount": amount,
                "stage": "prospect",
                "close_date": close,
            },
        )
    ]
    checks = [
        {
            "table": "deals",
            "where": {"customer_id": customer["id"], "title": title},
            "expect": {"amount": amount, "stage": "prospect", "close_date": close},
        },
        {"table": "deals", "count": len(state["deals"]) + 1},
        {"unchanged": ["customers", "contacts"]},
    ]
    return prompt, calls, checks


def churn_customer(state: State, rng: random.Random):
    open_by_customer: dict[int, list[dict[str, Any]]] = {}
    for row in state["deals"]:
        if row["stage"] in ("prospect", "negotiation"):
            open_by_customer.setdefault(row["customer_id"], []).append(row)
    candidates = [row for row in state["customers"] if row["status"] == "active" and row["id"] in open_by_customer]
    customer = rng.choice(candidates)
    prompt = (
        f"{customer['name']} has cancelled everything. Set the customer's status to churned and mark each of "
        "its open deals (stage prospect or negotiation) as lost. Leave its other deals alone."
    )
    calls = [_call("update_record", table="customers", id=customer["id"], fields={"status": "churned"})]
    calls += [
        _call("update_record", table="deals", id=deal["id"], fields={"stage": "lost"})
        for deal in open_by_customer[customer["id"]]
    ]
    checks: list[dict[str, Any]] = [
        {"table": "customers", "where": {"id": customer["id"]}, "expect": {"status": "churned"}}
    ]
    for deal in state["deals"]:
        if deal["customer_id"] == customer["id"]:
            final = "lost" if deal["stage"] in ("prospect", "negotiation") else deal["stage"]
            checks.append({"table": "deals", "where": {"id": deal["id"]}, "expect": {"stage": final}})
    checks.append(
        {
            "table": "deals",
            "where": {"stage": "lost"},
            "count": sum(row["stage"] == "lost" for row in state["deals"]) + len(open_by_customer[customer["id"]]),
        }
    )
    checks.append({"unchanged": ["contacts"]})
    return prompt, calls, checks


def reassign_manager(state: State, rng: random.Random):
    managed: dict[str, list[dict[str, Any]]] = {}
    for row in state["customers"]:
        managed.setdefault(row["account_manager"], []).append(row)
    leaving = rng.choice(sorted(name for name, rows in managed.items() if len(rows) >= 2))
    successor = rng.choice([row["name"] for row in state["employees"] if row["name"] != leaving])
    prompt = (
        f"{leaving} is leaving the company. Make {successor} the account manager of every customer that "
        f"{leaving} manages today."
    )
    calls = [
        _call("update_record", table="customers", id=row["id"], fields={"account_manager": successor})
        for row in managed[leaving]
    ]
    checks: list[dict[str, Any]] = [{"table": "customers", "where": {"account_manager": leaving}, "count": 0}]
    checks += [
        {"table": "customers", "where": {"id": row["id"]}, "expect": {"account_manager": successor}}
        for row in managed[leaving]
    ]
    checks.append(
        {
            "table": "customers",
            "where": {"account_manager": successor},
            "count": len(managed[leaving]) + len(managed.get(successor, [])),
        }
    )
    checks.append({"unchanged": ["contacts", "deals"]})
    return prompt, calls, checks


# Level 4: the expense policy.


def submit_capped_expenses(state: State, rng: random.Random):
    employee = rng.choice(state["employees"])["name"]
    limits = _limits(state)
    categories = rng.sample(sorted(limits), 3)
    items: list[dict[str, Any]] = []
    for position, category in enumerate(categories):
        limit = limits[category]
        # At least one item above its limit, so the policy matters.
        amount = float(limit + rng.randint(5, 60)) if position == 0 else float(rng.randint(5, int(limit) // 5) * 5)
        items.append({"category": category, "amount": amount, "description": f"{category} for the client visit"})
    rng.shuffle(items)
    title = f"Client visit {rng.choice(backoffice.COUNTRIES)}"
    spent = ", ".join(f"{item['category'].replace('_', ' ')} {item['amount']:g}" for item in items)
    prompt = (
        f'File an expense report titled "{title}" for {employee}. Receipts: {spent}. Follow the company '
        "expense policy (table policies): an item above its category's limit is claimed at the limit."
    )
    claimed = [{**item, "amount": min(item["amount"], limits[item["category"]])} for item in items]
    calls = [_call("submit_expense_report", employee=employee, title=title, items=claimed)]
    report_id = len(state["expense_reports"]) + 1
    checks: list[dict[str, Any]] = [
        {
            "table": "expense_reports",
            "where": {"employee": employee, "title": title},
            "expect": {"id": report_id, "status": "submitted", "total": sum(item["amount"] for item in claimed)},
        },
        {"table": "expense_reports", "count": len(state["expense_reports"]) + 1},
        {"table": "expense_items", "where": {"report_id": report_id}, "count": len(claimed)},
    ]
    checks += [
        {
            "table": "expense_items",
            "where": {"report_id": report_id, "category": item["category"]},
            "expect": {"amount": item["amount"]},
        }
        for item in claimed
    ]
    return prompt, calls, checks


def review_expense_report(state: State, rng: random.Random):
    limits = _limits(state)
    report = rng.choice(state["expense_reports"])
    items = [row for row in state["expense_items"] if row["report_id"] == report["id"]]
    within = all(item["amount"] <= limits[item["category"]] for item in items)
    decision = "approved" if within else "rejected"
    prompt = (
        f"Review expense report #{report['id']}: approve it if every item is within the policy limit of its "
        "category (table policies), otherwise reject it and say in the review note which item is over."
    )
    note = "" if within else "over the policy limit"
    calls = [
        _call(
            "update_record",
            table="expense_reports",
            id=report["id"],
            fields={"status": decision} | ({"review_note": note} if note else {}),
        )
    ]
    checks = [
        {"table": "expense_reports", "where": {"id": report["id"]}, "expect": {"status": decision}},
        {"table": "expense_reports", "where": {"status": "submitted"}, "count": len(state["expense_reports"]) - 1},
        {"unchanged": ["expense_items", "policies"]},
    ]
    return prompt, calls, checks


LEVELS: list[tuple[int, Template]] = [
    (1, deal_stage_by_id),
    (1, contact_phone_by_id),
    (1, customer_country_by_id),
    (2, deal_won_by_name),
    (2, contact_email_by_name),
    (2, add_contact),
    (3, new_deal),
    (3, churn_customer),
    (3, reassign_manager),
    (4, submit_capped_expenses),
    (4, review_expense_report),
]


def backoffice_tasks(*, per_template: int = TASKS_PER_TEMPLATE) -> Iterator[dict[str, Any]]:
    """Task objects in the import format, the same on every call."""
    seed = FIRST_SEED
    for level, template in LEVELS:
        for index in range(per_template):
            seed += 1
            state = LocalWorld(environment=backoffice.ENVIRONMENT, seed=seed).state()
            request, calls, checks = template(state, random.Random(f"{template.__name__}:{index}"))
            yield {
                "key": f"backoffice-{level}-{template.__name__.replace('_', '-')}-{index:03d}",
                "prompt": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": request}],
                "answer": json.dumps(calls),
                "verifier": {
                    "kind": "state_check",
                    "environment": backoffice.ENVIRONMENT,
                    "seed": seed,
                    "checks": checks,
                },
                "tools": backoffice.TOOL_SCHEMAS,
                "domain": "workflow",
                "metadata": {
                    "level": level,
                    "template": template.__name__,
                    "environment": backoffice.ENVIRONMENT,
                    "seed": seed,
                    "reference_calls": len(calls),
                },
                "authoring_cost_usd": 20 * level,
            }
