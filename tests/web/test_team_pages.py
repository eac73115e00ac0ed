"""The team's review pages: claims on the queue, the leads' claims page, second blind reviews, agreement
and adjudication. Each page's role is checked by someone who must be refused.

alice authors, bob and dora review, lena leads.
"""

import pytest
from django.urls import reverse

from curation.models import TaskStatus
from review import services as review_services
from review.models import BlindItem, ReviewClaim
from tests.review.test_review import submitted

pytestmark = pytest.mark.django_db


def html(client, user, url):
    client.force_login(user)
    response = client.get(url)
    assert response.status_code == 200, response.status_code
    return response.content.decode()


def test_claiming_on_the_queue_page_hides_the_task_from_the_other_reviewer(client, alice, bob, dora, arithmetic):
    submitted(arithmetic, alice, "t-1", "t-2")
    client.force_login(bob)
    client.post(reverse("review_action", args=["arithmetic", "t-1", "claim"]))
    assert ReviewClaim.objects.get().reviewer == bob
    page = html(client, bob, reverse("review_queue"))
    assert 'id="review-task" data-key="t-1"' in page and "Held by <strong>bob</strong>" in page
    page = html(client, dora, reverse("review_queue"))
    assert 'data-key="t-2"' in page and "t-1" not in page and "1 task waiting" in page
    # Posting a decision on it anyway is refused with who holds it.
    response = client.post(reverse("review_action", args=["arithmetic", "t-1", "approve"]), follow=True)
    assert "claimed by bob" in response.content.decode()
    assert arithmetic.tasks.get(key="t-1").status == TaskStatus.IN_REVIEW


def test_only_leads_open_the_claims_page_and_reassign(client, alice, bob, dora, lena, arithmetic):
    (task,) = submitted(arithmetic, alice, "t-1")
    review_services.review_claim(task=task, reviewer=bob)
    client.force_login(bob)
    assert client.get(reverse("review_claims")).status_code == 403
    assert client.post(reverse("review_claims"), {"action": "release", "task": task.pk}).status_code == 403
    client.force_login(alice)
    assert client.get(reverse("review_claims")).status_code == 403
    page = html(client, lena, reverse("review_claims"))
    assert 'data-key="t-1"' in page and "<td>bob</td>" in page
    client.post(reverse("review_claims"), {"action": "reassign", "task": task.pk, "reviewer": dora.pk})
    assert ReviewClaim.objects.get().reviewer == dora
    client.post(reverse("review_claims"), {"action": "release", "task": task.pk})
    assert not ReviewClaim.objects.exists()
    response = client.post(reverse("review_claims"), {"action": "assign", "strategy": "round_robin"}, follow=True)
    assert "1 task(s) assigned" in response.content.decode()


def test_the_second_reviewer_sees_the_task_but_never_the_first_decision(settings, client, alice, bob, dora, arithmetic):
    settings.PASSBAND_DOUBLE_REVIEW_SHARE = 1.0
    submitted(arithmetic, alice, "t-1")
    client.force_login(bob)
    response = client.post(
        reverse("review_action", args=["arithmetic", "t-1", "reject"]), {"comment": "FIRST-SECRET"}, follow=True
    )
    assert "kept blind until a second reviewer" in response.content.decode()
    item = BlindItem.objects.get()
    client.force_login(bob)  # bob may not give the second review of his own decision
    assert client.get(reverse("blind_review", args=[item.pk])).status_code == 403
    assert "No task is waiting for your second review" in html(client, bob, reverse("second_review_next"))
    client.force_login(dora)
    assert client.get(reverse("second_review_next")).url == reverse("blind_review", args=[item.pk])
    page = html(client, dora, reverse("blind_review", args=[item.pk]))
    assert "t-1: what is 0 + 1?" in page and "FIRST-SECRET" not in page and "bob" not in page
    assert "reject</strong>" not in page
    client.post(reverse("blind_review", args=[item.pk]), {"verdict": "fail", "note": "agreed"})
    assert arithmetic.tasks.get(key="t-1").status == TaskStatus.REJECTED


def test_a_lead_adjudicates_on_the_page_and_agreement_is_reported(settings, client, alice, bob, dora, lena, arithmetic):
    settings.PASSBAND_DOUBLE_REVIEW_SHARE = 1.0
    (task,) = submitted(arithmetic, alice, "t-1")
    review_services.review_approve(task=task, reviewer=bob, comment="looks right")
    item = BlindItem.objects.get()
    client.force_login(dora)
    client.post(reverse("blind_review", args=[item.pk]), {"verdict": "fail", "note": "answer is wrong"})
    assert client.get(reverse("adjudication_list")).status_code == 403
    assert client.post(reverse("adjudication_decide", args=[item.pk]), {"verdict": "pass"}).status_code == 403
    page = html(client, lena, reverse("adjudication_list"))
    assert "looks right" in page and "answer is wrong" in page and 'data-key="t-1"' in page
    client.post(reverse("adjudication_decide", args=[item.pk]), {"verdict": "pass", "comment": "bob is right"})
    assert arithmetic.tasks.get(key="t-1").status == TaskStatus.APPROVED
    page = html(client, dora, reverse("review_agreement"))
    assert "bob · dora" in page and "0/1" in page


def test_a_lead_adds_a_gold_item_from_the_queue_and_reviewers_may_not(client, alice, bob, lena, arithmetic):
    submitted(arithmetic, alice, "g-1")
    url = reverse("gold_add", args=["arithmetic", "g-1"])
    client.force_login(bob)
    assert client.post(url, {"decision": "approve"}).status_code == 403
    assert 'id="gold-form"' not in html(client, bob, reverse("review_queue"))
    assert 'id="gold-form"' in html(client, lena, reverse("review_queue"))
    client.post(url, {"decision": "reject", "next": "/review/"})
    item = BlindItem.objects.get()
    assert (item.kind, item.decision) == (BlindItem.Kind.GOLD_TASK, "fail")
