"""Sharing the review queue: a claim hides a task from other reviewers and blocks their decisions until
it expires; leads assign round-robin or by domain and reassign; reviewers may not.

alice authors, bob and dora review, lena leads.
"""

from datetime import timedelta

import pytest
from django.utils import timezone

from calibration import selectors
from curation.errors import CurationError
from curation.models import Task, TaskStatus
from curation.services import environment_create
from review import assignments
from review import services as review_services
from review.models import ReviewClaim
from tests.review.test_review import submitted

pytestmark = pytest.mark.django_db


def queue_keys(user):
    return [task.key for task in selectors.review_queue(user=user)]


def test_a_claim_hides_the_task_from_others_and_blocks_their_decision(alice, bob, dora, arithmetic):
    first, second = submitted(arithmetic, alice, "t-1", "t-2")
    review_services.review_claim(task=second, reviewer=bob)
    assert queue_keys(bob) == ["t-2", "t-1"]  # the claimer's own claims first
    assert queue_keys(dora) == ["t-1"]
    with pytest.raises(CurationError, match="claimed by bob"):
        review_services.review_approve(task=second, reviewer=dora)
    with pytest.raises(CurationError, match="claimed by bob"):
        assignments.claim_take(task=second, reviewer=dora)
    second.refresh_from_db()
    assert second.status == TaskStatus.IN_REVIEW
    # Bulk decisions skip it too, saying who holds it.
    result = review_services.reviews_bulk(tasks=arithmetic.tasks.all(), reviewer=dora, decision="approve")
    assert result.decided == ["t-1"] and result.skipped[0].startswith("t-2: t-2 is claimed by bob")
    review_services.review_approve(task=second, reviewer=bob)
    assert not ReviewClaim.objects.exists()  # the decision ends the claim


def test_an_expired_claim_counts_for_nothing(alice, bob, dora, arithmetic):
    (task,) = submitted(arithmetic, alice, "t-1")
    claim = assignments.claim_take(task=task, reviewer=bob)
    ReviewClaim.objects.filter(pk=claim.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert queue_keys(dora) == ["t-1"]
    assert assignments.claim_take(task=task, reviewer=dora).reviewer == dora
    assert ReviewClaim.objects.get().reviewer == dora


def test_claims_expire_after_the_configured_minutes(settings, alice, bob, arithmetic):
    settings.PASSBAND_CLAIM_MINUTES = 30
    (task,) = submitted(arithmetic, alice, "t-1")
    claim = assignments.claim_take(task=task, reviewer=bob)
    assert claim.expires_at - claim.claimed_at == timedelta(minutes=30)


def test_nobody_claims_their_own_task_or_a_decided_one(alice, bob, dora, arithmetic):
    (own,) = submitted(arithmetic, bob, "bobs")
    with pytest.raises(CurationError, match="your own task"):
        assignments.claim_take(task=own, reviewer=bob)
    (task,) = submitted(arithmetic, alice, "t-1")
    review_services.review_approve(task=task, reviewer=dora)
    with pytest.raises(CurationError, match="approved, not waiting"):
        assignments.claim_take(task=task, reviewer=bob)


def test_round_robin_shares_the_unclaimed_queue_and_skips_authors(alice, bob, dora, lena, arithmetic):
    tasks = submitted(arithmetic, alice, "t-1", "t-2", "t-3", "t-4", "t-5")
    submitted(arithmetic, dora, "doras")
    assignments.claim_take(task=tasks[0], reviewer=bob)
    result = assignments.queue_assign(tasks=arithmetic.tasks.all(), strategy="round_robin", by=lena)
    # Oldest first, each reviewer in turn by name; dora's turn for her own task passes to lena.
    assert result.assigned == {"bob": ["t-2", "t-5"], "dora": ["t-3"], "lena": ["t-4", "doras"]}
    holders = dict(ReviewClaim.objects.values_list("task__key", "reviewer__username"))
    assert holders["t-1"] == "bob"  # a live claim is left alone
    assert holders["doras"] != "dora"  # never one's own task
    assert set(holders) == {"t-1", "t-2", "t-3", "t-4", "t-5", "doras"}
    # Running it again assigns nothing more.
    assert assignments.queue_assign(tasks=arithmetic.tasks.all(), strategy="round_robin", by=lena).count == 0


def test_by_domain_assigns_only_to_reviewers_of_that_domain(alice, bob, dora, lena, arithmetic):
    code = environment_create(name="snippets", domain="code", default_verifier={"kind": "math"})
    submitted(arithmetic, alice, "m-1", "m-2")
    submitted(code, alice, "c-1")
    assignments.reviewer_domain_set(reviewer=bob, domains=["math"], by=lena)
    assignments.reviewer_domain_set(reviewer=dora, domains=["math", " code "], by=lena)
    result = assignments.queue_assign(tasks=Task.objects.all(), strategy="domain", by=lena)
    holders = dict(ReviewClaim.objects.values_list("task__key", "reviewer__username"))
    assert holders["c-1"] == "dora"
    assert sorted([holders["m-1"], holders["m-2"]]) == ["bob", "dora"]
    assert result.unassigned == []
    # A domain nobody takes is reported, not forced on someone.
    other = environment_create(name="tools", domain="tool_use", default_verifier={"kind": "math"})
    submitted(other, alice, "x-1")
    result = assignments.queue_assign(tasks=other.tasks.all(), strategy="domain", by=lena)
    assert result.unassigned == ["x-1: no reviewer takes its domain 'tool_use'"]


def test_leads_reassign_and_reviewers_may_not(alice, bob, dora, lena, arithmetic):
    (task,) = submitted(arithmetic, alice, "t-1")
    assignments.claim_take(task=task, reviewer=bob)
    with pytest.raises(CurationError, match="Only leads"):
        assignments.claim_reassign(task=task, to_reviewer=dora, by=bob)
    with pytest.raises(CurationError, match="Only leads"):
        assignments.queue_assign(tasks=arithmetic.tasks.all(), strategy="round_robin", by=dora)
    with pytest.raises(CurationError, match="may not review"):
        assignments.claim_reassign(task=task, to_reviewer=alice, by=lena)
    claim = assignments.claim_reassign(task=task, to_reviewer=dora, by=lena)
    assert (claim.reviewer, claim.how, claim.assigned_by) == (dora, ReviewClaim.How.REASSIGNED, lena)
    assert [c.task.key for c in assignments.claims_active()] == ["t-1"]
    with pytest.raises(CurationError, match="Only dora or a lead"):
        assignments.claim_release(task=task, by=bob)
    assignments.claim_release(task=task, by=lena)
    assert not ReviewClaim.objects.exists()


def test_a_lead_is_a_reviewer_and_decides(alice, lena, arithmetic):
    (task,) = submitted(arithmetic, alice, "t-1")
    review_services.review_approve(task=task, reviewer=lena)
    task.refresh_from_db()
    assert task.status == TaskStatus.APPROVED
