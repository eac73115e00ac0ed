"""POST /api/v1/feedback: trainers report pass counts per checkpoint; outgrown tasks retire (audited, reversible)."""

import pytest

from accounts.services import api_token_create
from calibration import selectors, services
from calibration.models import FeedbackReport
from curation.models import StatusChange, Task, TaskStatus
from curation.services import task_transition
from engine import stats
from tests.factories import import_tasks, math_task

pytestmark = pytest.mark.django_db
URL = "/api/v1/feedback"


@pytest.fixture
def feedback_token(charlie):
    return api_token_create(user=charlie, name="trainer", scopes=["feedback"])[1]


@pytest.fixture
def active_task(arithmetic, alice):
    import_tasks(arithmetic, alice, math_task("sum"), math_task("other", "What is 4 + 4?", "8"))
    Task.objects.filter(environment=arithmetic).update(status=TaskStatus.ACTIVE)
    return Task.objects.get(key="sum")


def post(client, token, body):
    return client.post(URL, body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")


def report(step, attempts, passes, **extra):
    return {"task": "sum", "checkpoint": f"ckpt-{step}", "step": step, "attempts": attempts, "passes": passes, **extra}


def test_feedback_retires_an_outgrown_task_and_later_feedback_revives_it(client, feedback_token, active_task):
    first = post(client, feedback_token, report(1000, 64, 10))
    assert first.status_code == 201
    assert first.json()["band"] == "in_band" and first.json()["status"] == "active"

    second = post(client, feedback_token, report(2000, 64, 62)).json()
    third = post(client, feedback_token, report(3000, 64, 63)).json()
    retired = second if second["status_changed"] else third
    assert retired["band"] == "retire" and retired["status"] == "retired"
    active_task.refresh_from_db()
    assert active_task.status == TaskStatus.RETIRED
    change = StatusChange.objects.filter(task=active_task).last()
    assert (change.from_status, change.to_status, change.changed_by) == ("active", "retired", None)
    assert change.reason.startswith(services.FEEDBACK_RETIRE_REASON) and "charlie" in change.reason

    # The history is per checkpoint; older checkpoints count half as much per step back.
    drift = services.feedback_drift(task_version=active_task.current_version)
    assert drift.checkpoints == 3 and drift.latest_checkpoint == "ckpt-3000"
    expected = stats.discounted_posterior(history=[(0, 64, 10), (1, 64, 62), (2, 64, 63)], discount=0.5)
    assert drift.pass_rate == pytest.approx(expected.mean)

    history = selectors.feedback_history(task_version=active_task.current_version)
    assert [(row["checkpoint"], row["attempts"], row["passes"]) for row in history] == [
        ("ckpt-1000", 64, 10),
        ("ckpt-2000", 64, 62),
        ("ckpt-3000", 64, 63),
    ]

    # Reversible: a later checkpoint that finds it hard again brings it back, audited.
    revived = post(client, feedback_token, report(4000, 64, 5)).json()
    assert revived["band"] == "in_band" and revived["status"] == "active" and revived["status_changed"]
    assert StatusChange.objects.filter(task=active_task).last().reason.startswith(services.FEEDBACK_REVIVE_REASON)


def test_a_person_can_reverse_an_automatic_retirement(feedback_token, client, active_task, bob):
    for step, passes in ((1, 63), (2, 64)):
        post(client, feedback_token, report(step, 64, passes))
    active_task.refresh_from_db()
    assert active_task.status == TaskStatus.RETIRED
    task_transition(task=active_task, to_status=TaskStatus.ACTIVE, by=bob, reason="still useful for the 7B run")
    active_task.refresh_from_db()
    assert active_task.status == TaskStatus.ACTIVE


def test_a_list_of_reports_and_retried_report_ids(client, feedback_token, active_task):
    body = [report(5, 8, 4, report_id="run-1/5/sum"), {**report(5, 8, 0, report_id="run-1/5/other"), "task": "other"}]
    first = post(client, feedback_token, body)
    assert first.status_code == 201 and [item["task"] for item in first.json()] == ["sum", "other"]
    again = post(client, feedback_token, body)
    assert again.status_code == 200 and all(item["duplicate"] for item in again.json())
    assert FeedbackReport.objects.count() == 2


def test_tasks_outside_the_approved_lifecycle_are_not_retired(client, feedback_token, arithmetic, alice, staff):
    import_tasks(arithmetic, alice, math_task("sum"))
    Task.objects.filter(key="sum").update(status=TaskStatus.IN_REVIEW)
    # Work under review is not a trainer's to see, so not theirs to report on either.
    assert post(client, feedback_token, report(1, 128, 128)).status_code == 404
    staff_token = api_token_create(user=staff, name="ops", scopes=["feedback"])[1]
    result = post(client, staff_token, report(1, 128, 128)).json()
    assert result["band"] == "retire" and result["status"] == "in_review" and not result["status_changed"]


def test_bad_reports_and_missing_scope(client, feedback_token, active_task, alice, charlie):
    assert post(client, feedback_token, report(1, 8, 9)).status_code == 400
    assert post(client, feedback_token, report(-1, 8, 1)).status_code == 400
    assert post(client, feedback_token, {**report(1, 8, 1), "task": "missing"}).status_code == 404
    assert post(client, feedback_token, {**report(1, 8, 1), "version": 7}).status_code == 400
    verify_only = api_token_create(user=charlie, name="grader", scopes=["verify"])[1]
    assert post(client, verify_only, report(1, 8, 1)).status_code == 403
    assert client.post(URL, report(1, 8, 1), content_type="application/json").status_code in (401, 403)
    assert FeedbackReport.objects.count() == 0


def test_beat_reprobes_too_hard_and_retired_tasks_with_a_small_probability(arithmetic, alice):
    from calibration.models import Band, Calibration
    from tests.calibration.scripted import import_scripted, scripted_model

    rates = {"never": 0.0, "half": 0.5, "outgrown": 0.5}
    import_scripted(arithmetic, alice, rates)
    with scripted_model("scripted", rates) as (model, _server):
        campaign = services.campaign_start(
            # 72 failures: enough to decide too_hard (8 would leave "never" undecided).
            environment=arithmetic,
            probe_model=model,
            created_by=alice,
            rollouts=72,
            seed=5,
            enqueue=False,
        )
        services.campaign_run_inline(campaign=campaign)
    assert Calibration.objects.get(task_version__task__key="never").band == Band.TOO_HARD
    Task.objects.filter(key="outgrown").update(status=TaskStatus.RETIRED)

    assert services.reprobe_sample(probability=0.0, cap=32, enqueue=False) == []
    [again] = services.reprobe_sample(probability=1.0, cap=32, enqueue=False)
    assert again.policy == "adaptive" and again.max_rollouts == 32 and again.probe_model == model
    assert sorted(again.items.values_list("task_version__task__key", flat=True)) == ["never", "outgrown"]
