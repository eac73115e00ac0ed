"""The weak-test check in the app: mutants of a code task's reference solution against its own tests
(engine/verifiers/mutation.py), stored on the version (``TaskVersion.weak_tests``) and shown on its card.

It runs with the import audit (``curation.services.draft_audit`` calls ``weak_tests_audit`` once the
reference passes) and on demand over an environment (``environment_weak_tests_check``, `manage.py
weak_tests`). The mutants run in the sandbox as any completion does; this module only stores what came back.
PASSBAND_WEAK_TESTS_MUTANTS (0: the import audit skips it) and PASSBAND_WEAK_TESTS_LIMIT set its size and flag.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db.models import F, QuerySet

from curation.models import Environment, Task, TaskVersion
from engine.verifiers import mutation

logger = logging.getLogger(__name__)


def weak_tests_audit(
    *,
    verifier: dict[str, Any],
    answer: str | None,
    prompt: Any,
    tools: list[Any] | None = None,
    mutants: int | None = None,
) -> dict[str, Any] | None:
    """The check's result as stored on a version (``MutationResult.as_dict``), or None when it does not apply
    (not a ``code`` task), is turned off (PASSBAND_WEAK_TESTS_MUTANTS=0) or crashed (logged: a flag of ours,
    never a failed import). `mutants` overrides the setting."""
    count = settings.PASSBAND_WEAK_TESTS_MUTANTS if mutants is None else mutants
    if count <= 0 or not mutation.applies_to(verifier):
        return None
    try:
        result = mutation.weak_tests_check(
            verifier=verifier,
            answer=answer,
            prompt=prompt,
            tools=tools,
            mutants=count,
            limit=settings.PASSBAND_WEAK_TESTS_LIMIT,
        )
    except Exception:
        logger.exception("the weak-test check crashed")
        return None
    return None if result is None else result.as_dict()


def weak_tests_flag(weak_tests: dict[str, Any] | None) -> str:
    """A sentence for a flagged result ("" when not flagged or not run)."""
    if not weak_tests or not weak_tests.get("flagged"):
        return ""
    return (
        f"weak tests: {weak_tests['survived']} of {weak_tests['mutants']} mutants of the reference survived "
        f"(share {weak_tests['survived_share']:.2f} above {weak_tests['limit']:.2f}; some may be equivalent)"
    )


@dataclass
class WeakTestsReport:
    """One on-demand run over an environment's current versions."""

    environment: str
    checked: int = 0
    flagged: list[dict] = field(default_factory=list)  # {"task", "version", "weak_tests"} per flagged task
    not_run: list[str] = field(default_factory=list)  # code tasks the check could not run, with why

    def as_dict(self) -> dict:
        return {
            "environment": self.environment,
            "checked": self.checked,
            "flagged_count": len(self.flagged),
            "flagged": self.flagged,
            "not_run": self.not_run,
        }


def environment_weak_tests_check(
    *, environment: Environment, tasks: QuerySet[Task] | None = None, mutants: int | None = None
) -> WeakTestsReport:
    """Run the check on the current version of each ``code`` task of `environment` (or of `tasks` among
    them), store each result on its version and return the report. `mutants`: at most this many a task
    (default PASSBAND_WEAK_TESTS_MUTANTS, or mutation.MUTANTS when that is 0)."""
    count = mutants or settings.PASSBAND_WEAK_TESTS_MUTANTS or mutation.MUTANTS
    report = WeakTestsReport(environment=environment.name)
    chosen = tasks if tasks is not None else Task.objects.all()
    versions = TaskVersion.objects.filter(
        task__in=chosen.filter(environment=environment), task__current_version=F("pk"), verifier__kind="code"
    ).select_related("task")
    for version in versions.order_by("task__key_order", "task__key").iterator(chunk_size=200):
        result = weak_tests_audit(
            verifier=version.verifier, answer=version.answer, prompt=version.prompt, tools=version.tools, mutants=count
        )
        if result is None:
            continue
        report.checked += 1
        if result["reason"]:
            report.not_run.append(f"{version.task.key}: {result['reason']}")
        elif result["flagged"]:
            report.flagged.append({"task": version.task.key, "version": version.number, "weak_tests": result})
        version.weak_tests = result
        version.save(update_fields=["weak_tests"], allow_update=True)  # a derived verdict, not the content
    return report
