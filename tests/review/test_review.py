"""Review lifecycle: claim, approve, reject, send back, bulk, comments; every change audited."""

import pytest
from django.urls import reverse

from calibration import selectors as review_selectors
from calibration.models import Band, Calibration, ProbeModel
from curation.errors import CurationError
from curation.models import Comment, StatusChange, TaskStatus
from curation.services import task_transition
from review import services as review_services
from review.models import Review
from tests.factories import import_tasks, math_task

pytestmark = pytest.mark.django_db


def submitted(environment, owner, *keys):
    import_tasks(
        environment,
        owner,
        *[
            math_task(key, question=f"{key}: what is {index} + 1?", answer=str(index + 1))
            for index, key in enumerate(keys)
        ],
    )
    tasks = []
    for key in keys:
        task = environment.tasks.get(key=key)
        tasks.append(task_transition(task=task, to_status=TaskStatus.SUBMITTED, by=owner))
    return tasks


def test_approve_claims_then_approves_and_audits_both_steps(alice, bob, arithmetic):
    (task,) = submitted(arithmetic, alice, "t-1")
    review = review_services.review_approve(task=task, reviewer=bob, comment="clean")
    task.refresh_from_db()
    assert task.status == TaskStatus.APPROVED and review.decision == Review.Decision.APPROVE
    steps = list(task.status_changes.values_list("from_status", "to_status", "changed_by__username"))
    assert steps == [
        ("draft", "submitted", "alice"),
        ("submitted", "in_review", "bob"),
        ("in_review", "approved", "bob"),
    ]


@pytest.mark.parametrize("service", [review_services.review_reject, review_services.review_send_back])
def test_reject_and_send_back_need_a_comment(alice, bob, arithmetic, service):
    (task,) = submitted(arithmetic, alice, "t-1")
    with pytest.raises(CurationError, match="comment is required"):
        service(task=task, reviewer=bob, comment="  ")
    task.refresh_from_db()
    assert task.status == TaskStatus.SUBMITTED and not Review.objects.exists()


def test_send_back_returns_the_task_to_its_author_with_the_comment(client, alice, bob, arithmetic):
    (task,) = submitted(arithmetic, alice, "t-1")
    review_services.review_send_back(task=task, reviewer=bob, comment="Use a harder number.")
    task.refresh_from_db()
    assert task.status == TaskStatus.CHANGES_REQUESTED
    assert task.status_changes.last().reason == "Use a harder number."
    client.force_login(alice)
    page = client.get(reverse("task_detail", args=["arithmetic", "t-1"])).content.decode()
    assert "Use a harder number." in page and "Submit for review" in page
    # The author can resubmit after changes.
    task_transition(task=task, to_status=TaskStatus.SUBMITTED, by=alice)


def test_reviewers_cannot_review_their_own_tasks_and_authors_cannot_review(alice, bob, arithmetic):
    (own,) = submitted(arithmetic, bob, "bobs")
    with pytest.raises(CurationError, match="your own task"):
        review_services.review_approve(task=own, reviewer=bob)
    (task,) = submitted(arithmetic, alice, "t-1")
    with pytest.raises(CurationError, match="Only reviewers"):
        review_services.review_approve(task=task, reviewer=alice)


def test_failed_audit_cannot_be_approved(alice, bob, arithmetic):
    (task,) = submitted(arithmetic, alice, "t-1")
    version = task.current_version
    version.audit_passed = False
    version.audit_problems = ["reference answer fails"]
    version.save(allow_update=True)
    task.refresh_from_db()
    with pytest.raises(CurationError, match="failed its audit"):
        review_services.review_approve(task=task, reviewer=bob)


def test_decided_tasks_cannot_be_decided_again(alice, bob, arithmetic):
    (task,) = submitted(arithmetic, alice, "t-1")
    review_services.review_reject(task=task, reviewer=bob, comment="duplicate of t-0")
    with pytest.raises(CurationError, match="only submitted or in-review"):
        review_services.review_approve(task=task, reviewer=bob)


def _calibrate(task, probe_model, *, band, flags=()):
    Calibration.objects.create(
        task_version=task.current_version, probe_model=probe_model, band=band, flags=list(flags), attempts=8
    )


def test_queue_puts_flagged_tasks_first(alice, bob, arithmetic):
    plain, hard, easy, audit, trouble = submitted(arithmetic, alice, "plain", "hard", "easy", "audit", "trouble")
    model = ProbeModel.objects.create(name="probe", backend="openai")
    _calibrate(plain, model, band=Band.IN_BAND)
    _calibrate(hard, model, band=Band.TOO_HARD)
    _calibrate(easy, model, band=Band.RETIRE)
    _calibrate(trouble, model, band=Band.UNDECIDED, flags=["verifier_trouble"])
    version = audit.current_version
    version.audit_passed = False
    version.save(allow_update=True)
    queue = review_selectors.review_queue(user=bob)
    assert [task.key for task in queue] == ["trouble", "audit", "easy", "hard", "plain"]
    assert [task.key for task in review_selectors.review_queue(user=bob, flag="too_hard")] == ["hard"]
    assert [task.key for task in review_selectors.review_queue(user=bob, band=Band.IN_BAND)] == ["plain"]


def test_bulk_approve_applies_to_everything_matching_not_just_a_page(client, alice, bob, arithmetic):
    keys = [f"t-{index}" for index in range(25)]
    submitted(arithmetic, alice, *keys)
    submitted(arithmetic, alice, "other")
    client.force_login(bob)
    response = client.post(reverse("review_bulk") + "?q=t-", {"decision": "approve"})
    assert response.status_code == 302
    assert arithmetic.tasks.filter(status=TaskStatus.APPROVED).count() == 25
    assert arithmetic.tasks.get(key="other").status == TaskStatus.SUBMITTED
    assert Review.objects.filter(reviewer=bob).count() == 25


def test_bulk_reject_needs_a_comment(client, alice, bob, arithmetic):
    submitted(arithmetic, alice, "t-1")
    client.force_login(bob)
    client.post(reverse("review_bulk"), {"decision": "reject", "comment": ""})
    assert arithmetic.tasks.get().status == TaskStatus.SUBMITTED


def test_queue_page_shows_one_task_with_actions_and_progress(client, alice, bob, arithmetic):
    first, second = submitted(arithmetic, alice, "t-1", "t-2")
    client.force_login(bob)
    page = client.get(reverse("review_queue")).content.decode()
    assert "1 of 2" in page and 'id="approve-form"' in page and "review.js" in page
    response = client.post(reverse("review_action", args=["arithmetic", "t-1", "approve"]), {"position": "0"})
    assert response.status_code == 302 and response.url.startswith(reverse("review_queue"))
    page = client.get(response.url).content.decode()
    assert "1 of 1" in page and "t-2" in page
    assert 'id="reviewer-progress"' in page and "<td>bob</td>" in page


def test_reject_from_the_queue_records_reason(client, alice, bob, arithmetic):
    submitted(arithmetic, alice, "t-1")
    client.force_login(bob)
    client.post(reverse("review_action", args=["arithmetic", "t-1", "reject"]), {"comment": "ambiguous question"})
    change = StatusChange.objects.filter(to_status=TaskStatus.REJECTED).get()
    assert change.changed_by == bob and change.reason == "ambiguous question"


def test_claim_moves_submitted_to_in_review(client, alice, bob, arithmetic):
    submitted(arithmetic, alice, "t-1")
    client.force_login(bob)
    client.post(reverse("review_action", args=["arithmetic", "t-1", "claim"]))
    assert arithmetic.tasks.get().status == TaskStatus.IN_REVIEW


def test_threaded_comments_reply_and_resolve(client, alice, bob, arithmetic):
    (task,) = submitted(arithmetic, alice, "t-1")
    client.force_login(bob)
    client.post(reverse("comment_create", args=["arithmetic", "t-1"]), {"body": "Is 4 right?"})
    root = Comment.objects.get()
    client.force_login(alice)
    client.post(reverse("comment_create", args=["arithmetic", "t-1"]), {"body": "Yes.", "parent": root.pk})
    reply = Comment.objects.exclude(pk=root.pk).get()
    assert reply.parent == root
    review_services.comment_add(task=task, author=bob, body="nested", parent=reply)
    assert Comment.objects.get(body="nested").parent == root
    client.post(reverse("comment_resolve", args=[reply.pk]))
    root.refresh_from_db()
    assert root.resolved_at is not None and root.resolved_by == alice
    page = client.get(reverse("task_detail", args=["arithmetic", "t-1"])).content.decode()
    assert "Is 4 right?" in page and "resolved by alice" in page


def test_empty_comment_is_refused(alice, arithmetic):
    import_tasks(arithmetic, alice, math_task("t-1"))
    with pytest.raises(CurationError, match="cannot be empty"):
        review_services.comment_add(task=arithmetic.tasks.get(), author=alice, body=" ")
