"""The quality card: one JSON document per task version with the evidence behind it. Pure: no Django.

The card is built in the Django layer (releases/quality_cards.py, one selector) and carried as a plain
dict: every export row has it under `quality_card` (engine.formats calls `card_of`), the API serves it,
and a release's manifest summarises its tasks' cards (`cards_summary`). Its JSON Schema is
`quality_card.schema.json` beside this module (`$id` ends with the card version); docs/quality-card.md
documents every field. A trainer or a hub filters on it with `validate` and plain dict reads.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Mapping
from decimal import Decimal
from importlib import metadata
from pathlib import Path
from typing import Any

CARD_VERSION = "1.1.0"  # 1.1.0: weak_tests carries the mutation check (optional fields)
SCHEMA_PATH = Path(__file__).with_name("quality_card.schema.json")
NOT_RUN = {"status": "not_run"}


class QualityCardError(ValueError):
    """A card that does not meet the schema; the message names the field's path and what is wrong."""


@functools.cache
def schema() -> dict[str, Any]:
    """The card's JSON Schema (draft 2020-12) as a dict."""
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


def schema_id() -> str:
    return schema()["$id"]


def validate(card: Any) -> dict[str, Any]:
    """Check `card` (a dict, or its JSON text) against the schema; returns the dict. Raises
    QualityCardError naming the first failing field's path, e.g. `calibrations/0/band: 'hard' is not one of ...`."""
    import jsonschema

    if isinstance(card, (str, bytes)):
        card = json.loads(card)
    validator = jsonschema.Draft202012Validator(schema(), format_checker=jsonschema.FormatChecker())
    error = jsonschema.exceptions.best_match(validator.iter_errors(card))
    if error is not None:
        where = "/".join(str(part) for part in error.absolute_path) or "(card)"
        raise QualityCardError(f"{where}: {error.message}")
    return card


def card_of(record: Mapping[str, Any]) -> dict[str, Any] | None:
    """The card an export record carries (None when the record was read without one): the one place
    every export format takes it from."""
    return record.get("quality_card")


def card_text(card: Mapping[str, Any] | None) -> str | None:
    """The card as compact JSON text with sorted keys (Parquet columns, Harbor's task.toml)."""
    return None if card is None else json.dumps(card, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@functools.cache
def engine_version() -> str:
    try:
        return metadata.version("passband")
    except metadata.PackageNotFoundError:
        return "unknown"


def verifier_identity(verifier: Mapping[str, Any]) -> dict[str, Any]:
    """Kind and version of a task's verifier: `config_hash` (12 hex digits of the sha256 of its canonical
    config), the judge's `prompt_version` for `llm_judge` (else None) and the engine's version."""
    canonical = json.dumps(verifier, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    kind = str(verifier.get("kind", ""))
    prompt_version = None
    if kind == "llm_judge":
        from engine.verifiers.kinds import llm_judge

        prompt_version = llm_judge.prompt_version(verifier)
    return {
        "kind": kind,
        "config_hash": hashlib.sha256(canonical.encode()).hexdigest()[:12],
        "prompt_version": prompt_version,
        "engine_version": engine_version(),
    }


def weak_tests_entry(stored: Mapping[str, Any] | None) -> dict[str, Any]:
    """The card's `weak_tests` from what the weak-test check stored on the version (None: not run)."""
    if not stored:
        return dict(NOT_RUN)
    if stored.get("reason") or not stored.get("mutants"):
        return {"status": "not_run", "reason": str(stored.get("reason") or "no mutant could be graded")}
    return {
        "status": "run",
        "surviving_mutant_share": stored["survived_share"],
        "mutants": stored["mutants"],
        "survived": stored["survived"],
        "flagged": bool(stored["flagged"]),
        "limit": stored["limit"],
    }


def impossible_variants_entry(counted: Mapping[str, Any] | None) -> dict[str, Any]:
    """The card's `impossible_variants` from a version's attempts on its ready variants, over every probe
    (`{"trials", "false_passes"}`; None: never probed): the false-pass rate and its one-sided exact (Clopper-
    Pearson) upper 95% bound."""
    if not counted or not counted.get("trials"):
        return dict(NOT_RUN)
    from engine.verifiers.impossible import false_pass_bound

    trials, passes = int(counted["trials"]), int(counted["false_passes"])
    return {
        "status": "run",
        "false_pass_rate": passes / trials,
        "upper_bound": false_pass_bound(passes=passes, trials=trials),
    }


def dollars(value: Any) -> str:
    """Dollars as exact decimal text ("0" for None)."""
    return "0" if value is None else format(Decimal(str(value)).normalize(), "f")


def cards_summary(cards: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """What a release's manifest says about its tasks' cards: counts per verifier kind, audit, gameability,
    impossible-variant and weak-test status, tasks with open near-duplicate or contamination flags,
    tampered rollouts or flagged weak tests, review agreement, and the summed authoring and probing cost."""
    counts: dict[str, Counter] = {name: Counter() for name in ("verifier_kinds", "audit", "gameability")}
    counts |= {"impossible_variants": Counter(), "weak_tests": Counter()}
    tasks = near_duplicates = contaminated = tampered = second = agreed = weak = 0
    authoring = probing = Decimal(0)
    for card in cards:
        tasks += 1
        counts["verifier_kinds"][card["verifier"]["kind"]] += 1
        for name in ("audit", "gameability", "impossible_variants", "weak_tests"):
            counts[name][card[name]["status"]] += 1
        near_duplicates += card["similarity"]["near_duplicate"]["open"] > 0
        contaminated += card["similarity"]["contamination"]["open"] > 0
        tampered += card["tamper"]["tampered_rollouts"] > 0
        weak += bool(card["weak_tests"].get("flagged"))
        second += card["review"]["agreement"]["second_reviews"]
        agreed += card["review"]["agreement"]["agreed"]
        authoring += Decimal(card["cost"]["authoring_usd"])
        probing += Decimal(card["cost"]["probing_usd"])
    return {
        "card_version": CARD_VERSION,
        "schema": schema_id(),
        "tasks": tasks,
        **{name: dict(sorted(counter.items())) for name, counter in counts.items()},
        "open_near_duplicates": near_duplicates,
        "open_contamination": contaminated,
        "with_tampered_rollouts": tampered,
        "weak_tests_flagged": weak,
        "review_agreement": {"second_reviews": second, "agreed": agreed, "share": agreed / second if second else None},
        "cost_usd": {"authoring": dollars(authoring), "probing": dollars(probing)},
    }
