"""Prime Intellect verifiers: `prompt`, `answer`, `info` (JSON text) and `task` (the environment)."""

from __future__ import annotations

from engine.formats.format import ExportFormat, calibration_of, json_text


def verifiers_fields(record: dict) -> dict:
    """`prompt`, `answer`, `info` (key, version, hash, verifier, tools, metadata as JSON text) and `task`."""
    info = {
        "task_key": record["task_key"],
        "version": record["version"],
        "version_hash": record["version_hash"],
        "verifier": record["verifier"],
        "tools": record.get("tools") or [],
        "metadata": record.get("metadata") or {},
    }
    return {
        "prompt": record["prompt"],
        "answer": record["answer"],
        "info": json_text(info),
        "task": record["environment"],
        "task_key": record["task_key"],
        "version_hash": record["version_hash"],
        "calibration": calibration_of(record),
    }


FORMAT = ExportFormat(
    name="verifiers",
    description="Prime Intellect verifiers: `prompt`, `answer`, `info` (JSON text) and `task`.",
    fields=verifiers_fields,
    columns=(
        ("prompt", "messages"),
        ("answer", "text"),
        ("info", "text"),
        ("task", "text"),
        ("task_key", "text"),
        ("version_hash", "text"),
        ("calibration", "calibration"),
    ),
    card_as_text=True,
)
