"""The world a seed builds: employees, customers with their contacts and deals, the expense policies and
a few submitted expense reports. The same seed always gives the same rows, byte for byte, so every
helper here draws from the one generator in a fixed order."""

from __future__ import annotations

import random
import sqlite3

from .schema import POLICY_LIMITS, SCHEMA

FIRST_NAMES = (
    "Ana",
    "Bilal",
    "Chen",
    "Dana",
    "Eitan",
    "Fatima",
    "Goran",
    "Hana",
    "Ivo",
    "Jun",
    "Kofi",
    "Lena",
    "Mateo",
    "Nia",
    "Oskar",
    "Priya",
    "Quentin",
    "Rosa",
    "Sami",
    "Tove",
    "Umar",
    "Vera",
    "Wen",
    "Yusuf",
)
LAST_NAMES = (
    "Abara",
    "Berg",
    "Costa",
    "Dahl",
    "Egan",
    "Fischer",
    "Gupta",
    "Holm",
    "Ito",
    "Jansen",
    "Kim",
    "Lopez",
    "Moreau",
    "Novak",
    "Okafor",
    "Park",
    "Quinn",
    "Rossi",
    "Sato",
    "Tanaka",
    "Varga",
    "Weber",
)
COMPANIES = (
    "Acme Tools",
    "Birch Analytics",
    "Cobalt Freight",
    "Delta Dental Group",
    "Evergreen Foods",
    "Fjord Energy",
    "Granite Bank",
    "Harbor Logistics",
    "Iris Biotech",
    "Juniper Retail",
    "Kestrel Air",
    "Lumen Media",
    "Maple Insurance",
    "Nimbus Cloud",
    "Orchid Hotels",
    "Pioneer Mining",
)
INDUSTRIES = ("manufacturing", "software", "logistics", "healthcare", "food", "energy", "finance", "retail")
COUNTRIES = ("Germany", "France", "Japan", "Brazil", "Canada", "Kenya", "India", "Sweden")
DEPARTMENTS = ("sales", "engineering", "finance", "support")
TITLES = ("CFO", "Head of Procurement", "IT Director", "Operations Manager", "CEO", "Buyer")
PRODUCTS = (
    "Platform licence",
    "Support renewal",
    "Onboarding package",
    "Data add-on",
    "Training days",
    "Hardware refresh",
)


def reset(seed: int) -> sqlite3.Connection:
    """A fresh in-memory world for `seed`; the same seed always gives the same rows."""
    rng = random.Random(f"backoffice:{int(seed)}")
    connection = sqlite3.connect(":memory:")
    connection.executescript(SCHEMA)
    people = [f"{first} {last}" for first in FIRST_NAMES for last in LAST_NAMES]
    rng.shuffle(people)
    employees = people[:8]
    _add_employees(connection, employees)
    _add_customers(connection, rng, employees=employees, people_left=people[8:])
    _add_policies(connection, rng)
    _add_expense_reports(connection, rng, employees)
    connection.commit()
    return connection


def _add_employees(connection: sqlite3.Connection, employees: list[str]) -> None:
    for index, name in enumerate(employees, start=1):
        connection.execute(
            "INSERT INTO employees VALUES (?, ?, ?, ?)",
            (index, name, DEPARTMENTS[index % len(DEPARTMENTS)], _email(name, "passband-corp.example")),
        )


def _add_customers(
    connection: sqlite3.Connection, rng: random.Random, *, employees: list[str], people_left: list[str]
) -> None:
    """Twelve customers, each with one to three contacts (drawn from `people_left`) and deals."""
    companies = list(COMPANIES)
    rng.shuffle(companies)
    contact_id = deal_id = 0
    for customer_id, company in enumerate(companies[:12], start=1):
        connection.execute(
            "INSERT INTO customers VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                customer_id,
                company,
                rng.choice(INDUSTRIES),
                rng.choice(("bronze", "silver", "gold")),
                rng.choice(COUNTRIES),
                rng.choice(employees[:4]),
                "active" if rng.random() < 0.85 else "churned",
            ),
        )
        domain = company.lower().replace(" ", "") + ".example"
        for _ in range(rng.randint(1, 3)):
            contact_id += 1
            name = people_left.pop()
            connection.execute(
                "INSERT INTO contacts VALUES (?, ?, ?, ?, ?, ?)",
                (
                    contact_id,
                    customer_id,
                    name,
                    _email(name, domain),
                    f"+1-555-{rng.randint(1000, 9999)}",
                    rng.choice(TITLES),
                ),
            )
        for product in rng.sample(PRODUCTS, rng.randint(1, 3)):
            deal_id += 1
            connection.execute(
                "INSERT INTO deals VALUES (?, ?, ?, ?, ?, ?)",
                (
                    deal_id,
                    customer_id,
                    product,
                    float(rng.randint(10, 900) * 100),
                    rng.choice(("prospect", "negotiation", "negotiation", "won", "lost")),
                    f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
                ),
            )


def _add_policies(connection: sqlite3.Connection, rng: random.Random) -> None:
    for policy_id, (category, (limits, rule)) in enumerate(POLICY_LIMITS.items(), start=1):
        limit = float(rng.choice(limits))
        connection.execute(
            "INSERT INTO policies VALUES (?, ?, ?, ?)", (policy_id, category, limit, rule.format(limit=f"{limit:g}"))
        )


def _add_expense_reports(connection: sqlite3.Connection, rng: random.Random, employees: list[str]) -> None:
    item_id = 0
    for report_id in range(1, 7):
        employee = rng.choice(employees)
        items = [
            (category, float(rng.randint(2, 60) * 5), rng.choice(("client visit", "conference", "team offsite")))
            for category in rng.sample(list(POLICY_LIMITS), rng.randint(1, 3))
        ]
        connection.execute(
            "INSERT INTO expense_reports VALUES (?, ?, ?, ?, ?, ?)",
            (report_id, employee, f"Trip {report_id}", "submitted", sum(item[1] for item in items), ""),
        )
        for category, amount, description in items:
            item_id += 1
            connection.execute(
                "INSERT INTO expense_items VALUES (?, ?, ?, ?, ?)", (item_id, report_id, category, amount, description)
            )


def _email(name: str, domain: str) -> str:
    return name.lower().replace(" ", ".") + "@" + domain
