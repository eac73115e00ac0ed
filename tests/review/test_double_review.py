"""Two independent, blind reviews of a drawn share of tasks; gold items; agreement per reviewer pair and
environment (kappa checked by hand); disagreements settled by a lead.

alice authors, bob and dora review, lena leads.
"""

import pytest

from curation.errors import CurationError
from curation.models import TaskStatus
from review import double_review
from review import services as review_services
from review.models import Adjudication, BlindItem, BlindReview, Review
from tests.review.test_review import submitted

pytestmark = pytest.mark.django_db


@pytest.fixture
def everything_drawn(settings):
    settings.PASSBAND_DOUBLE_REVIEW_SHARE = 1.0


def status(task):
    task.refresh_from_db()
    return task.status


def test_the_draw_is_deterministic_and_follows_the_share():
    drawn = [double_review.drawn_for_double_review(version, share=0.25, seed=0) for version in range(1, 2001)]
    assert drawn == [double_review.drawn_for_double_review(version, share=0.25, seed=0) for version in range(1, 2001)]
    assert 400 < sum(drawn) < 600
    assert not any(double_review.drawn_for_double_review(version, share=0.0) for version in range(1, 200))


def test_a_drawn_first_decision_waits_for_a_blind_second_that_agrees(everything_drawn, alice, bob, dora, arithmetic):
    (task,) = submitted(arithmetic, alice, "t-1")
    assert review_services.review_approve(task=task, reviewer=bob, comment="clean") is None
    assert status(task) == TaskStatus.IN_REVIEW and not Review.objects.exists()
    item = BlindItem.objects.get(kind=BlindItem.Kind.DOUBLE_REVIEW)
    assert (item.decided_by, item.decision) == ("bob", "pass")
    # It left the queue, and no one decides it the ordinary way meanwhile.
    with pytest.raises(CurationError, match="waits for a second, blind review"):
        review_services.review_reject(task=task, reviewer=dora, comment="no")
    # bob never gets his own item as a second review; dora does.
    assert not double_review.second_reviews_open(reviewer=bob).exists()
    assert list(double_review.second_reviews_open(reviewer=dora)) == [item]
    with pytest.raises(CurationError, match="Only reviewers give blind verdicts"):
        double_review.second_review_record(item=item, reviewer=bob, verdict="pass")
    double_review.second_review_record(item=item, reviewer=dora, verdict="pass", note="fine")
    assert status(task) == TaskStatus.APPROVED
    assert sorted(Review.objects.values_list("reviewer__username", "decision")) == [
        ("bob", "approve"),
        ("dora", "approve"),
    ]
    assert not double_review.adjudication_queue().exists()


def test_the_second_reviewer_is_not_shown_the_first_decision(everything_drawn, alice, bob, arithmetic):
    (task,) = submitted(arithmetic, alice, "t-1")
    review_services.review_reject(task=task, reviewer=bob, comment="SECRET-FIRST-REASON", defect="leaked_benchmark")
    shown = double_review.task_blind_view(item=BlindItem.objects.get())
    assert "SECRET-FIRST-REASON" not in repr(shown) and "bob" not in repr(shown) and "fail" not in repr(shown)
    assert shown.key == "t-1" and shown.prompt[0]["content"].startswith("t-1:") and "leaked" not in repr(shown)


def test_a_disagreement_goes_to_a_lead_who_settles_it(everything_drawn, alice, bob, dora, lena, arithmetic):
    (task,) = submitted(arithmetic, alice, "t-1")
    review_services.review_approve(task=task, reviewer=bob)
    item = BlindItem.objects.get()
    double_review.second_review_record(item=item, reviewer=dora, verdict="fail", note="answer is wrong")
    assert status(task) == TaskStatus.IN_REVIEW
    assert list(double_review.adjudication_queue()) == [item]
    with pytest.raises(CurationError, match="Only leads"):
        double_review.adjudicate(item=item, lead=bob, verdict="pass")
    with pytest.raises(CurationError, match="comment is required"):
        double_review.adjudicate(item=item, lead=lena, verdict="fail")
    double_review.adjudicate(item=item, lead=lena, verdict="fail", comment="dora is right")
    assert status(task) == TaskStatus.REJECTED
    assert Review.objects.get().defect == "other"  # bob approved: no defect was named
    assert not double_review.adjudication_queue().exists()
    with pytest.raises(CurationError, match="not a disagreement|already settled"):
        double_review.adjudicate(item=item, lead=lena, verdict="pass")
    assert Adjudication.objects.get().lead == lena


def test_undrawn_tasks_are_decided_at_once(settings, alice, bob, arithmetic):
    settings.PASSBAND_DOUBLE_REVIEW_SHARE = 0.0
    (task,) = submitted(arithmetic, alice, "t-1")
    assert review_services.review_approve(task=task, reviewer=bob) is not None
    assert status(task) == TaskStatus.APPROVED and not BlindItem.objects.exists()


def test_gold_items_measure_each_reviewer(alice, bob, dora, lena, arithmetic):
    tasks = submitted(arithmetic, alice, "g-1", "g-2")
    with pytest.raises(CurationError, match="Only leads"):
        double_review.gold_add(task=tasks[0], decision="approve", by=bob)
    gold = [double_review.gold_add(task=tasks[0], decision="approve", by=lena)]
    gold.append(double_review.gold_add(task=tasks[1], decision="reject", by=lena))
    assert double_review.gold_add(task=tasks[0], decision="approve", by=lena) == gold[0]  # once
    for item in gold:
        double_review.second_review_record(item=item, reviewer=bob, verdict="pass")
        double_review.second_review_record(item=item, reviewer=dora, verdict=item.decision)
    accuracy = {row.reviewer: row.accuracy for row in double_review.gold_accuracy()}
    assert (accuracy["bob"].successes, accuracy["bob"].n) == (1, 2)
    assert (accuracy["dora"].successes, accuracy["dora"].n, accuracy["dora"].estimate) == (2, 2, 1.0)
    assert accuracy["bob"].low < 0.5 < accuracy["bob"].high
    # A gold item never changes its task.
    assert [status(task) for task in tasks] == [TaskStatus.SUBMITTED, TaskStatus.SUBMITTED]


def test_kappa_per_pair_matches_a_hand_computed_example(everything_drawn, alice, bob, dora, arithmetic):
    """Ten tasks, bob first and dora second:
        bob approve, dora approve: 4    bob approve, dora reject: 1
        bob reject,  dora approve: 2    bob reject,  dora reject: 3
    po = 7/10 = 0.7; bob approves 5/10, dora 6/10, so pe = 0.5*0.6 + 0.5*0.4 = 0.5;
    kappa = (0.7 - 0.5) / (1 - 0.5) = 0.4; SE = sqrt(0.7*0.3 / (10 * 0.5**2)) = sqrt(0.084) = 0.28983."""
    pairs = [("approve", "pass")] * 4 + [("approve", "fail")] + [("reject", "pass")] * 2 + [("reject", "fail")] * 3
    tasks = submitted(arithmetic, alice, *[f"k-{index}" for index in range(10)])
    for task, (first, second) in zip(tasks, pairs):
        decide = review_services.review_approve if first == "approve" else review_services.review_reject
        decide(task=task, reviewer=bob, comment="why")
        item = BlindItem.objects.get(task_version=task.current_version)
        double_review.second_review_record(item=item, reviewer=dora, verdict=second)
    agreement = double_review.reviewer_agreement()
    (pair,) = agreement["pairs"]
    assert (pair.first, pair.second, pair.measures.n) == ("bob", "dora", 10)
    assert pair.measures.agreement.estimate == pytest.approx(0.7)
    kappa = pair.measures.kappa
    assert kappa.chance == pytest.approx(0.5) and kappa.estimate == pytest.approx(0.4)
    assert kappa.standard_error == pytest.approx(0.28983, abs=1e-5)
    assert kappa.low < 0.4 < kappa.high
    (environment,) = agreement["environments"]
    assert environment.first == "arithmetic" and environment.measures.kappa.estimate == pytest.approx(0.4)
    assert BlindReview.objects.count() == 10
    assert len(double_review.adjudication_queue()) == 3


def test_a_pair_lines_labels_up_by_person_whoever_went_first(everything_drawn, alice, bob, dora, arithmetic):
    """bob first on one task (approve; dora rejects), dora first on another (approve; bob rejects): by
    person the table is bob pass/dora fail once and bob fail/dora pass once, agreement 0 of 2."""
    first, second = submitted(arithmetic, alice, "p-1", "p-2")
    review_services.review_approve(task=first, reviewer=bob)
    review_services.review_approve(task=second, reviewer=dora)
    for task, reviewer in ((first, dora), (second, bob)):
        item = BlindItem.objects.get(task_version=task.current_version)
        double_review.second_review_record(item=item, reviewer=reviewer, verdict="fail")
    (pair,) = double_review.reviewer_agreement()["pairs"]
    assert (pair.first, pair.second) == ("bob", "dora")
    assert (pair.measures.agreement.successes, pair.measures.n) == (0, 2)
    assert pair.measures.kappa.estimate == pytest.approx(-1.0)


def test_an_agreed_rejection_keeps_the_first_reviewers_defect(everything_drawn, alice, bob, dora, arithmetic):
    (task,) = submitted(arithmetic, alice, "t-1")
    review_services.review_reject(task=task, reviewer=bob, comment="same as t-0", defect="duplicate")
    double_review.second_review_record(item=BlindItem.objects.get(), reviewer=dora, verdict="fail")
    assert status(task) == TaskStatus.REJECTED
    assert sorted(Review.objects.values_list("reviewer__username", "decision", "defect")) == [
        ("bob", "reject", "duplicate"),
        ("dora", "reject", "duplicate"),
    ]
