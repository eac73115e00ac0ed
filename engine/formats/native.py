"""Passband's own format: the import format plus environment, status, version, hash and calibration."""

from __future__ import annotations

from typing import Any

from engine.formats.format import ExportFormat, calibration_of

# What native rows add to the import format; the importer refuses unknown fields, so drop these to re-import.
NATIVE_EXTRA_FIELDS = ("environment", "status", "version", "version_hash", "calibration", "quality_card")


def _cost_text(value: Any) -> str:
    # Decimal dollars stay exact as text; the import format accepts a string ("" when not given).
    return "" if value is None else str(value)


def native_fields(record: dict) -> dict:
    """The import format plus environment, status, version, hash and calibration (NATIVE_EXTRA_FIELDS)."""
    return {
        "key": record["task_key"],
        "environment": record["environment"],
        "domain": record["domain"],
        "status": record.get("status"),
        "version": record["version"],
        "version_hash": record["version_hash"],
        "prompt": record["prompt"],
        "answer": record["answer"],
        "verifier": record["verifier"],
        "tools": record.get("tools") or [],
        "metadata": record.get("metadata") or {},
        "authoring_cost_usd": _cost_text(record.get("authoring_cost_usd")),
        "difficulty": record.get("declared_difficulty"),
        "calibration": calibration_of(record),
    }


FORMAT = ExportFormat(
    name="native",
    description="Passband's import format plus environment, version, hash and calibration (verifier, tools and "
    "metadata as JSON text).",
    fields=native_fields,
    columns=(
        ("key", "text"),
        ("environment", "text"),
        ("domain", "text"),
        ("status", "text"),
        ("version", "int64"),
        ("version_hash", "text"),
        ("prompt", "messages"),
        ("answer", "text"),
        ("verifier", "text"),
        ("tools", "text"),
        ("metadata", "text"),
        ("authoring_cost_usd", "text"),
        ("difficulty", "float64"),
        ("calibration", "calibration"),
    ),
    json_fields=("verifier", "tools", "metadata"),
    hub_default=True,
)
