"""Judged rollouts drawn for blind review: only llm_judge tasks' pass/fail verdicts, deterministic, never twice."""

import pytest
from django.core.management import call_command

from calibration import services
from calibration.errors import CalibrationError
from calibration.models import Rollout
from engine.verifiers.kinds import llm_judge
from review.models import BlindItem
from tests.factories import import_tasks, judge_task, math_task, rollouts_with

pytestmark = pytest.mark.django_db


@pytest.fixture
def judged(arithmetic, alice):
    """Two judge tasks under one judge and rubric (one prompt version), one with another rubric, a math task."""
    tasks = [judge_task(arithmetic, alice, f"j-{index}") for index in range(2)]
    other = judge_task(arithmetic, alice, "j-other", rubric="Pass if it explains the sum.")
    for task in (*tasks, other):
        rollouts_with(task, alice, ["pass", "fail"] * 20 + ["error", "timeout"])
    import_tasks(arithmetic, alice, math_task("m-1"))
    rollouts_with(arithmetic.tasks.get(key="m-1"), alice, ["pass", "fail"] * 20)
    return {"tasks": tasks, "other": other}


def drawn() -> list[tuple[int, str, str, str]]:
    return list(
        BlindItem.objects.order_by("object_id").values_list("object_id", "decided_by", "decided_version", "decision")
    )


def test_only_judged_pass_and_fail_verdicts_are_drawn_with_their_judge_version_and_text(judged):
    assert services.judge_samples_draw(share=1.0, limit=1000) == 120
    rollouts = Rollout.objects.in_bulk([object_id for object_id, *_ in drawn()])
    assert {rollout.task_version.verifier["kind"] for rollout in rollouts.values()} == {"llm_judge"}
    assert {rollout.outcome for rollout in rollouts.values()} == {"pass", "fail"}
    for item in BlindItem.objects.all():
        rollout = rollouts[item.object_id]
        assert (item.decision, item.content, item.task_version_id) == (
            rollout.outcome,
            rollout.text,
            rollout.task_version_id,
        )
        assert item.decided_by == "grader"
        assert item.decided_version == llm_judge.prompt_version(rollout.task_version.verifier)
    assert len({version for _, _, version, _ in drawn()}) == 2


def test_the_draw_is_deterministic_and_a_share_of_each_judge_version(judged, arithmetic, alice):
    added = services.judge_samples_draw(share=0.3, limit=1000, seed=7)
    first = drawn()
    assert 0 < added < 120 and len(first) == added
    BlindItem.objects.all().delete()
    assert services.judge_samples_draw(share=0.3, limit=1000, seed=7) == added
    assert drawn() == first
    BlindItem.objects.all().delete()
    services.judge_samples_draw(share=0.3, limit=1000, seed=8)
    assert drawn() != first  # another seed, another sample


def test_running_again_never_duplicates_and_keeps_what_was_drawn(judged, arithmetic, alice):
    services.judge_samples_draw(share=0.5, limit=1000)
    first = drawn()
    assert services.judge_samples_draw(share=0.5, limit=1000) == 0
    assert drawn() == first
    # New rollouts: the old items stay; only new eligible rollouts join.
    rollouts_with(judge_task(arithmetic, alice, "j-late"), alice, ["pass"] * 10)
    services.judge_samples_draw(share=0.5, limit=1000)
    assert set(first) < set(drawn())
    call_command("judge_samples", "--share", "0.5", "--limit", "1000")
    assert len(drawn()) == len(set(drawn()))


def test_the_limit_holds_per_judge_and_prompt_version_taking_the_lowest_ranks(judged):
    assert services.judge_samples_draw(share=1.0, limit=5) == 10
    by_version = {}
    for object_id, _, version, _ in drawn():
        by_version.setdefault(version, []).append(object_id)
    assert sorted(len(ids) for ids in by_version.values()) == [5, 5]
    for version, ids in by_version.items():
        candidates = Rollout.objects.filter(outcome__in=["pass", "fail"], task_version__verifier__kind="llm_judge")
        ranked = sorted(
            (
                services.judge_sample_rank(seed=0, judge="grader", prompt_version=version, rollout_id=rollout.pk),
                rollout.pk,
            )
            for rollout in candidates
            if llm_judge.prompt_version(rollout.task_version.verifier) == version
        )
        assert sorted(ids) == sorted(rollout_id for _, rollout_id in ranked[:5])
    assert services.judge_samples_draw(share=1.0, limit=5) == 0
    assert services.judge_samples_draw(share=1.0, limit=6) == 2


def test_pruned_rollouts_are_not_drawn_and_bad_settings_are_refused(judged):
    Rollout.objects.update(text="", pruned_at="2026-01-01T00:00:00Z")
    assert services.judge_samples_draw(share=1.0, limit=100) == 0
    with pytest.raises(CalibrationError, match="between 0 and 1"):
        services.judge_samples_draw(share=1.5, limit=10)
    with pytest.raises(CalibrationError, match="must not be negative"):
        services.judge_samples_draw(share=0.5, limit=-1)
