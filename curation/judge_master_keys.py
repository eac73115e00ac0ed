"""Judge master keys in the app: run the battery (engine/verifiers/master_keys.py) on a judge's tasks, keep
the result, let staff override a judge whose bound is above the limit, and say whether a judge may score.

The battery is queued when an environment's versions are written (`judge_master_keys_queue`, the audit
step), run by hand from the judge's page or `manage.py judge_master_keys NAME`. A judge may score a campaign
only when its latest run's upper bound is at or below PASSBAND_JUDGE_FALSE_PASS_LIMIT, or staff overrode that
run; a judge never measured may not score either. An override covers the run it was given on: a new run needs
its own.
"""

from __future__ import annotations

import logging

from celery import current_app
from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import F, QuerySet
from django.utils import timezone

from accounts.audit import audit_record
from curation.errors import CurationError
from curation.models import Environment, JudgeMasterKeyRun, TaskStatus, TaskVersion
from engine.verifiers import master_keys
from engine.verifiers.judges import get_judge
from engine.verifiers.kinds import llm_judge

logger = logging.getLogger(__name__)


def _limit() -> float:
    return settings.PASSBAND_JUDGE_FALSE_PASS_LIMIT


def judge_versions(*, judge: str) -> QuerySet[TaskVersion]:
    """The current, not rejected, task versions whose verifier is the `llm_judge` named `judge`."""
    return TaskVersion.objects.filter(
        task__current_version=F("pk"), verifier__kind=llm_judge.KIND, verifier__judge=judge
    ).exclude(task__status=TaskStatus.REJECTED)


def judge_master_keys_run(
    *, judge: str, started_by: AbstractBaseUser | None = None, sample: int = master_keys.SAMPLE
) -> JudgeMasterKeyRun:
    """Attack `sample` of the judge's tasks (all when fewer) with every master key and store the run.
    CurationError when the judge is not registered or has no task."""
    registered = get_judge(judge)
    if registered is None:
        raise CurationError(f"No judge {judge!r} is registered (PASSBAND_JUDGES): nothing to attack.")
    tasks = [
        master_keys.JudgedTask(key=f"{environment}/{key}", verifier=verifier, answer=answer, prompt=prompt)
        for environment, key, verifier, answer, prompt in judge_versions(judge=judge).values_list(
            "task__environment__name", "task__key", "verifier", "answer", "prompt"
        )
    ]
    if not tasks:
        raise CurationError(f"Judge {judge} grades no task yet: the battery needs its tasks.")
    result = master_keys.master_key_battery(judge=judge, tasks=master_keys.sample_tasks(tasks, size=sample))
    run = JudgeMasterKeyRun.objects.create(
        judge=judge,
        model=registered.model,
        tasks=result.tasks,
        trials=result.trials,
        false_passes=result.false_passes,
        errors=result.errors,
        upper_bound=result.upper_bound,
        level=result.level,
        limit=_limit(),
        prompt_versions=result.prompt_versions,
        findings=result.as_dict()["findings"],
        started_by=started_by,
    )
    audit_record(
        actor=started_by,
        action="judge_master_keys",
        obj=run,
        label=judge,
        detail={"trials": run.trials, "false_passes": run.false_passes, "upper_bound": run.upper_bound},
    )
    return run


def judge_latest_run(*, judge: str) -> JudgeMasterKeyRun | None:
    return JudgeMasterKeyRun.objects.filter(judge=judge).select_related("override_by").first()


def judge_latest_runs() -> list[JudgeMasterKeyRun]:
    """Each judge's latest run, by judge name."""
    latest: dict[str, JudgeMasterKeyRun] = {}
    for run in JudgeMasterKeyRun.objects.select_related("override_by").order_by("judge", "-created_at", "-id"):
        latest.setdefault(run.judge, run)
    return list(latest.values())


@transaction.atomic
def judge_scoring_override(*, judge: str, staff: AbstractBaseUser, reason: str) -> JudgeMasterKeyRun:
    """Staff let a judge whose latest bound is above the limit score campaigns, saying why (audited)."""
    if not staff.is_staff:
        raise CurationError("Only staff can let a judge above the false-pass limit score campaigns.")
    if not reason.strip():
        raise CurationError("Say why: a reason is required to override the master-key battery.")
    run = JudgeMasterKeyRun.objects.select_for_update().filter(judge=judge).first()
    if run is None:
        raise CurationError(f"Judge {judge} has not met the master-key battery: run it first.")
    if not run.above_limit:
        raise CurationError(f"Judge {judge}'s bound is within the limit: there is nothing to override.")
    run.override_reason, run.override_by, run.override_at = reason.strip(), staff, timezone.now()
    run.save(update_fields=["override_reason", "override_by", "override_at"])
    audit_record(actor=staff, action="judge_scoring_override", obj=run, label=judge, detail={"reason": reason.strip()})
    return run


def judge_scoring_block(*, judge: str) -> str:
    """Why the judge may not score a campaign, or "" when it may."""
    run = judge_latest_run(judge=judge)
    if run is None:
        return (
            f"judge {judge} has not met the master-key battery yet: run it from the judge's page or with "
            f"`manage.py judge_master_keys {judge}`"
        )
    if run.above_limit and run.override_at is None:
        return (
            f"judge {judge} passed {run.false_passes} of {run.trials} master-key attacks: the false-pass rate's "
            f"upper {run.level:.0%} bound {run.upper_bound:.3f} is above the limit {run.limit:.3f}; fix its rubric "
            "and run the battery again, or staff may override"
        )
    return ""


def judges_of(versions: list[TaskVersion]) -> list[str]:
    """The judges named by the `llm_judge` versions among `versions`, sorted."""
    return sorted(
        {
            str(version.verifier.get("judge", ""))
            for version in versions
            if isinstance(version.verifier, dict) and version.verifier.get("kind") == llm_judge.KIND
        }
    )


def judge_master_keys_queue(*, environment: Environment) -> None:
    """After the commit, queue the battery for each judge the environment's current versions name (the audit
    of judged tasks). A broker that is down is logged, not raised: `manage.py judge_master_keys` catches up."""
    judges = sorted(
        {
            judge
            for judge in TaskVersion.objects.filter(
                task__environment=environment, task__current_version=F("pk"), verifier__kind=llm_judge.KIND
            ).values_list("verifier__judge", flat=True)
            if isinstance(judge, str) and get_judge(judge) is not None
        }
    )

    if judges:
        transaction.on_commit(lambda: _queue(judges))


def judge_master_keys_request(*, judge: str, user: AbstractBaseUser) -> None:
    """Staff ask for a run of the battery on a registered judge; a worker runs it after the commit."""
    if not user.is_staff:
        raise CurationError("Only staff can run the master-key battery.")
    if get_judge(judge) is None:
        raise CurationError(f"No judge {judge!r} is registered (PASSBAND_JUDGES): nothing to attack.")
    transaction.on_commit(lambda: _queue([judge]))


def _queue(judges: list[str]) -> None:
    for judge in judges:
        try:
            current_app.tasks["curation.tasks.judge_master_keys"].delay(judge)
        except Exception:
            logger.exception("could not queue the master-key battery of judge %s", judge)
