"""The quality card of task versions (engine/quality_card.py, docs/quality-card.md): the one selector that
builds it, for the API and for every export.

`quality_cards` reads a batch of versions in a fixed number of queries (one per kind of evidence, not one
per version), so an export of 100,000 tasks builds its cards a chunk at a time.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from django.db import connection
from django.db.models import Count, F
from django.db.models.expressions import RawSQL

from calibration.models import Calibration, Rollout
from calibration.selectors.impossible_variants import version_impossible_variants
from curation.models import TaskVersion
from engine import quality_card
from releases.models import ReleaseItem, ReleaseStatus
from review.models import BlindItem, BlindReview, Review
from similarity.models import SimilarityFlag, VersionSignature

TAMPER_LABEL = "tampering:"  # gameability findings of the repository tampering battery start so
VERSION_FIELDS = (
    "pk", "number", "content_hash", "verifier", "audit_passed", "audit_problems", "gameable", "gameability_findings",
    "gameable_override_reason", "gameable_override_at", "authoring_cost_usd", "created_at", "weak_tests",
)  # fmt: skip
VERSION_RELATED = {
    "key": F("task__key"),
    "status": F("task__status"),
    "environment": F("task__environment__name"),
    "floor": F("task__environment__floor"),
    "retire_at": F("task__environment__retire_at"),
    "author": F("created_by__username"),
    "override_by": F("gameable_override_by__username"),
}
CALIBRATION_FIELDS = (
    "attempts", "successes", "verifier_errors", "pass_rate", "interval_low", "interval_high", "band", "decided",
    "predicted_probability", "policy", "cost_usd",
)  # fmt: skip


def quality_card_of(*, version: TaskVersion, release_id: int | None = None) -> dict[str, Any]:
    """The card of one task version (a plain dict meeting engine/quality_card.schema.json)."""
    return quality_cards(version_ids=[version.pk], release_id=release_id)[version.pk]


def quality_cards(*, version_ids: Sequence[int], release_id: int | None = None) -> dict[int, dict[str, Any]]:
    """Cards by version id for `version_ids` (ids that do not exist are left out). `release_id` names the
    release whose export carries them (provenance.release); None outside an export."""
    # Plain values, not model instances: building 2,000 instances with their relations costs more than the cards.
    versions = (
        TaskVersion.objects.filter(pk__in=_ids_in(list(version_ids)))
        .values(*VERSION_FIELDS, **VERSION_RELATED)
        .order_by("pk")
    )
    evidence = _Evidence(list(version_ids))
    return {version["pk"]: _card(version, evidence=evidence, release_id=release_id) for version in versions}


def _ids_in(ids: list[int]):
    """`ids` as the right side of `__in`: on PostgreSQL one array parameter, not thousands of placeholders
    (psycopg spends about 0.1 s splitting a query of 2,000 of them)."""
    if connection.vendor == "postgresql":
        return RawSQL("SELECT unnest(%s::bigint[])", (ids,))
    return ids


class _Evidence:
    """Each kind of evidence for a batch of versions, read once and grouped by version id."""

    def __init__(self, version_ids: list[int]) -> None:
        ids = _ids_in(version_ids)
        self.calibrations: dict[int, list[dict]] = defaultdict(list)
        calibrations = Calibration.objects.filter(task_version_id__in=ids).values(
            "task_version_id",
            *CALIBRATION_FIELDS,
            probe_model_name=F("probe_model__name"),
            run=F("probe_model__run"),
            checkpoint_step=F("probe_model__checkpoint_step"),
        )
        for calibration in calibrations:
            self.calibrations[calibration["task_version_id"]].append(calibration)
        tampered = Rollout.objects.filter(task_version_id__in=ids, outcome="tampered").values("task_version_id")
        self.tampered = {row["task_version_id"]: row["n"] for row in tampered.annotate(n=Count("id"))}
        self.flags: dict[int, list[dict]] = defaultdict(list)
        flags = SimilarityFlag.objects.filter(task_version_id__in=ids).values(
            "task_version_id", "kind", "resolved_at", "reference_source", "reference_item",
            neighbour_key=F("neighbour__task__key"),
        )  # fmt: skip
        for flag in flags.order_by("pk"):
            self.flags[flag["task_version_id"]].append(flag)
        signatures = VersionSignature.objects.filter(task_version_id__in=ids, checked=True)
        self.checked = set(signatures.values_list("task_version_id", flat=True))
        self.reviews: dict[int, list[dict]] = defaultdict(list)
        reviews = Review.objects.filter(task_version_id__in=ids).values(
            "task_version_id", "decision", "defect", "created_at", reviewer_name=F("reviewer__username")
        )
        for review in reviews.order_by("created_at", "pk"):
            self.reviews[review["task_version_id"]].append(review)
        self.second: dict[int, list[bool]] = defaultdict(list)
        seconds = BlindReview.objects.filter(
            item__task_version_id__in=ids, item__kind=BlindItem.Kind.DOUBLE_REVIEW
        ).values("verdict", version_id=F("item__task_version_id"), decision=F("item__decision"))
        for row in seconds:
            self.second[row["version_id"]].append(row["verdict"] == row["decision"])
        self.releases: dict[int, list[int]] = defaultdict(list)
        pinned = ReleaseItem.objects.filter(task_version_id__in=ids, release__status=ReleaseStatus.READY)
        for version_id, release in pinned.values_list("task_version_id", "release_id").order_by("release_id"):
            self.releases[version_id].append(release)
        self.impossible = version_impossible_variants(version_ids=version_ids)


def _time(value) -> str | None:
    return value.isoformat() if value is not None else None


def _card(version: dict, *, evidence: _Evidence, release_id: int | None) -> dict[str, Any]:
    pk = version["pk"]
    calibrations = sorted(
        evidence.calibrations.get(pk, []),
        key=lambda c: (c["run"], c["checkpoint_step"] or 0, c["probe_model_name"]),
    )
    findings = [finding.get("label", "") for finding in version["gameability_findings"] or []]
    agreements = evidence.second.get(pk, [])
    releases = evidence.releases.get(pk, [])
    if release_id is not None and release_id not in releases:
        releases = sorted([*releases, release_id])
    return {
        "card_version": quality_card.CARD_VERSION,
        "task": {
            "key": version["key"],
            "environment": version["environment"],
            "version": version["number"],
            "content_hash": version["content_hash"],
            "status": version["status"],
        },
        "calibrations": [_calibration(c, floor=version["floor"], retire_at=version["retire_at"]) for c in calibrations],
        "verifier": quality_card.verifier_identity(version["verifier"] or {}),
        "audit": {
            "status": {True: "passed", False: "failed", None: "not_run"}[version["audit_passed"]],
            "problems": [str(problem) for problem in version["audit_problems"] or []],
        },
        "gameability": {
            "status": {True: "gameable", False: "clean", None: "not_run"}[version["gameable"]],
            "findings": findings,
            "override": _override(version),
        },
        "tamper": {
            "tampered_rollouts": evidence.tampered.get(pk, 0),
            "battery_findings": [label for label in findings if label.startswith(TAMPER_LABEL)],
        },
        "impossible_variants": quality_card.impossible_variants_entry(evidence.impossible.get(pk)),
        "weak_tests": quality_card.weak_tests_entry(version["weak_tests"]),
        "similarity": _similarity(evidence.flags.get(pk, []), checked=pk in evidence.checked),
        "review": {
            "decisions": [
                {
                    "decision": review["decision"],
                    "reviewer": review["reviewer_name"],
                    "defect": review["defect"] or None,
                    "at": _time(review["created_at"]),
                }
                for review in evidence.reviews.get(pk, [])
            ],
            "agreement": {
                "second_reviews": len(agreements),
                "agreed": sum(agreements),
                "share": sum(agreements) / len(agreements) if agreements else None,
            },
        },
        "cost": {
            "authoring_usd": quality_card.dollars(version["authoring_cost_usd"]),
            "probing_usd": quality_card.dollars(sum((c["cost_usd"] for c in calibrations), Decimal(0))),
        },
        "provenance": {
            "author": version["author"],
            "created_at": _time(version["created_at"]),
            "content_hash": version["content_hash"],
            "release": release_id,
            "releases": releases,
        },
    }


def _calibration(calibration: dict, *, floor: float, retire_at: float) -> dict[str, Any]:
    policy = calibration["policy"] or {}
    return {
        "probe_model": calibration["probe_model_name"],
        "run": calibration["run"] or None,
        "checkpoint_step": calibration["checkpoint_step"],
        "attempts": calibration["attempts"],
        "successes": calibration["successes"],
        "verifier_errors": calibration["verifier_errors"],
        "pass_rate": calibration["pass_rate"],
        "interval": [calibration["interval_low"], calibration["interval_high"]],
        "band": calibration["band"],
        "decided": calibration["decided"],
        "band_predicted": calibration["predicted_probability"] is not None,
        "rule": {
            "policy": policy.get("kind"),
            "confidence": policy.get("confidence", 0.95),
            "round_size": policy.get("round_size"),
            "max_rollouts": policy.get("max_rollouts"),
            "floor": floor,
            "retire_at": retire_at,
        },
        "cost_usd": quality_card.dollars(calibration["cost_usd"]),
    }


def _override(version: dict) -> dict[str, Any] | None:
    if version["gameable_override_at"] is None:
        return None
    return {
        "reason": version["gameable_override_reason"],
        "by": version["override_by"],
        "at": _time(version["gameable_override_at"]),
    }


def _similarity(flags: list[dict], *, checked: bool) -> dict[str, Any]:
    def summary(kind: str, describe) -> dict[str, Any]:
        mine = [flag for flag in flags if flag["kind"] == kind]
        open_flags = [flag for flag in mine if flag["resolved_at"] is None]
        return {
            "open": len(open_flags),
            "resolved": len(mine) - len(open_flags),
            "names": sorted({describe(f) for f in open_flags}),
        }

    near = summary(SimilarityFlag.Kind.NEAR_DUPLICATE, lambda flag: flag["neighbour_key"] or "")
    contamination = summary(
        SimilarityFlag.Kind.CONTAMINATED, lambda flag: f"{flag['reference_source']}:{flag['reference_item']}"
    )
    return {
        "checked": checked or bool(flags),
        "near_duplicate": {"open": near["open"], "resolved": near["resolved"], "neighbours": near["names"]},
        "contamination": {
            "open": contamination["open"],
            "resolved": contamination["resolved"],
            "sources": contamination["names"],
        },
    }
