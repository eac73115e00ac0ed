"""TRL's GRPOTrainer: `prompt` as chat messages; the other columns reach the reward function."""

from __future__ import annotations

from engine.formats.format import ExportFormat, calibration_of, json_text


def trl_fields(record: dict) -> dict:
    """`prompt`, `answer`, the verifier and tools as JSON text, the task's key, environment and hash."""
    return {
        "prompt": record["prompt"],
        "answer": record["answer"],
        "verifier": json_text(record["verifier"]),
        "tools": json_text(record.get("tools") or []),
        "task_key": record["task_key"],
        "environment": record["environment"],
        "version_hash": record["version_hash"],
        "calibration": calibration_of(record),
    }


FORMAT = ExportFormat(
    name="trl",
    description="TRL's GRPOTrainer: `prompt` as chat messages; `answer`, `verifier` (JSON text) and the rest reach "
    "the reward function.",
    fields=trl_fields,
    columns=(
        ("prompt", "messages"),
        ("answer", "text"),
        ("verifier", "text"),
        ("tools", "text"),
        ("task_key", "text"),
        ("environment", "text"),
        ("version_hash", "text"),
        ("calibration", "calibration"),
    ),
    card_as_text=True,
)
