"""Judges checked against people: the blind review page never shows the judge's verdict, only reviewers
give verdicts (never on their own tasks), and a judge's page warns when its false-pass rate is above
the limit.

alice authors the judge tasks, bob reviews, dora is another reviewer, charlie trains (API only).
"""

import itertools
import re

import pytest
from django.test import Client
from django.urls import reverse

from accounts.services import api_token_create
from calibration import services
from review.models import BlindItem, BlindReview
from tests.conftest import make_user
from tests.factories import judge_task, rollouts_with

pytestmark = pytest.mark.django_db

SECRET_DETAIL = "judge: the response states 5, which matches the reference"


@pytest.fixture
def dora(django_user_model):
    return make_user(django_user_model, "dora", "reviewers")


@pytest.fixture
def judged_pair(arithmetic, alice):
    """One judge task with two rollouts of the very same text, judged pass and fail, both drawn."""
    task = judge_task(arithmetic, alice, "j-1")
    rollouts_with(task, alice, ["pass", "fail"], text="I think it is 5.", detail=SECRET_DETAIL)
    services.judge_samples_draw(share=1.0, limit=10)
    return {item.decision: item for item in BlindItem.objects.all()}


def page(client, user, url):
    client.force_login(user)
    response = client.get(url)
    assert response.status_code == 200, response.status_code
    return response.content.decode()


def without_item_and_token(html: str, item: BlindItem) -> str:
    html = html.replace(reverse("blind_review", args=[item.pk]), "ITEM")
    return re.sub(r'name="csrfmiddlewaretoken" value="[^"]+"', "TOKEN", html)


def test_the_blind_page_reads_the_same_whatever_the_judge_said(client, bob, judged_pair):
    passed, failed = judged_pair["pass"], judged_pair["fail"]
    shown_pass = page(client, bob, reverse("blind_review", args=[passed.pk]))
    shown_fail = page(client, bob, reverse("blind_review", args=[failed.pk]))
    # Two items whose only difference is the judge's verdict render the same page, byte for byte.
    assert without_item_and_token(shown_pass, passed) == without_item_and_token(shown_fail, failed)
    assert "I think it is 5." in shown_pass and "Question j-1" in shown_pass
    assert 'id="blind-reference"' in shown_pass and "Pass if the answer is 5." in shown_pass
    assert SECRET_DETAIL not in shown_pass and "reward" not in shown_pass.lower()


def test_the_reference_answer_is_shown_only_when_the_judge_saw_it(client, bob, arithmetic, alice):
    task = judge_task(arithmetic, alice, "hidden-ref", include_reference=False)
    task.current_version.answer = "SECRET-REFERENCE-42"
    task.current_version.save(allow_update=True)
    rollouts_with(task, alice, ["pass"])
    services.judge_samples_draw(share=1.0, limit=10)
    shown = page(client, bob, reverse("blind_review", args=[BlindItem.objects.get().pk]))
    assert "SECRET-REFERENCE-42" not in shown and 'id="blind-reference"' not in shown


def test_authors_cannot_review_and_reviewers_record_one_verdict_each(client, alice, bob, dora, judged_pair):
    item = judged_pair["pass"]
    url = reverse("blind_review", args=[item.pk])
    client.force_login(alice)
    assert client.get(reverse("blind_review_next")).status_code == 403
    assert client.post(url, {"verdict": "fail"}).status_code == 403
    assert not BlindReview.objects.exists()
    client.force_login(bob)
    assert client.post(url, {"verdict": "fail", "note": "  says 5 but hedges  "}).status_code == 302
    review = BlindReview.objects.get()
    assert (review.reviewer, review.verdict, review.note) == (bob, "fail", "says 5 but hedges")
    client.post(url, {"verdict": "pass"})  # a second verdict by the same reviewer is refused
    assert BlindReview.objects.get().verdict == "fail"
    assert "You said <strong>fail</strong>" in page(client, bob, url)
    client.force_login(dora)  # the item wanted one review: it has it
    client.post(url, {"verdict": "pass"})
    assert BlindReview.objects.count() == 1
    client.force_login(bob)
    assert client.post(reverse("blind_review", args=[judged_pair["fail"].pk]), {"verdict": "maybe"}).status_code == 302
    assert BlindReview.objects.count() == 1


def test_the_queue_leads_to_the_next_item_and_skips_the_reviewers_own_tasks(client, bob, dora, arithmetic, judged_pair):
    own = judge_task(arithmetic, bob, "bobs")
    rollouts_with(own, bob, ["pass"])
    services.judge_samples_draw(share=1.0, limit=10)
    own_item = BlindItem.objects.get(task_version__task=own)
    client.force_login(bob)
    assert client.get(reverse("blind_review", args=[own_item.pk])).status_code == 403
    seen = []
    for _ in range(3):
        response = client.get(reverse("blind_review_next"))
        if response.status_code == 200:
            break
        seen.append(response["Location"])
        client.post(response["Location"], {"verdict": "pass"})
    # Both of alice's items, each once, in the order they were drawn (by rank), never bob's own.
    drawn_order = BlindItem.objects.filter(task_version__task__owner__username="alice").order_by("created_at", "id")
    assert seen == [reverse("blind_review", args=[item.pk]) for item in drawn_order]
    assert 'id="blind-empty"' in response.content.decode()
    client.force_login(dora)
    assert client.get(reverse("blind_review_next"))["Location"] == reverse("blind_review", args=[own_item.pk])


def test_a_verdict_needs_the_csrf_token(bob, judged_pair):
    client = Client(enforce_csrf_checks=True)
    client.force_login(bob)
    assert client.post(reverse("blind_review", args=[judged_pair["pass"].pk]), {"verdict": "pass"}).status_code == 403
    assert not BlindReview.objects.exists()


OBJECT_IDS = itertools.count(1)


def reviewed(task, reviewer, judge: str, pairs: list[tuple[str, str]], version: str = "v1") -> None:
    """Blind items of `judge` with (judge's decision, reviewer's verdict) pairs; "" for no review yet."""
    for decision, verdict in pairs:
        item = BlindItem.objects.create(
            kind=BlindItem.Kind.JUDGED_ROLLOUT,
            object_id=next(OBJECT_IDS),
            task_version=task.current_version,
            content="an answer",
            decided_by=judge,
            decided_version=version,
            decision=decision,
        )
        if verdict:
            BlindReview.objects.create(item=item, reviewer=reviewer, verdict=verdict)


@pytest.fixture
def two_judges(arithmetic, alice, bob):
    task = judge_task(arithmetic, alice, "j-1")
    # loose: 10 passes, 3 of them failed by people (0.3); careful: 20 agreed verdicts, 1 waiting.
    reviewed(task, bob, "loose", [("pass", "pass")] * 7 + [("pass", "fail")] * 3 + [("fail", "fail")] * 5)
    reviewed(task, bob, "careful", [("pass", "pass")] * 10 + [("fail", "fail")] * 10 + [("pass", "")])


def test_the_judge_page_warns_above_the_false_pass_limit_and_not_below(client, alice, two_judges, settings):
    loose = page(client, alice, reverse("judge_detail", args=["loose"]))
    assert 'id="false-pass-warning"' in loose and "People failed 3 of the 10 responses" in loose
    careful = page(client, alice, reverse("judge_detail", args=["careful"]))
    assert 'id="false-pass-warning"' not in careful and "false-pass-warning" not in careful
    settings.PASSBAND_JUDGE_FALSE_PASS_LIMIT = 0.5
    assert 'id="false-pass-warning"' not in page(client, alice, reverse("judge_detail", args=["loose"]))


def test_the_judge_pages_report_n_accuracy_kappa_and_the_false_pass_rate(client, alice, charlie, two_judges):
    listing = page(client, alice, reverse("judge_list"))
    assert listing.index("careful") < listing.index("loose")
    assert "false passes clearly above the limit" in listing
    careful = page(client, alice, reverse("judge_detail", args=["careful"]))
    assert "<code>v1</code>" in careful and "all versions" in careful
    assert ">21<" in careful and ">20<" in careful  # sampled, reviewed
    assert "1.000" in careful  # accuracy and kappa
    client.force_login(charlie)
    assert client.get(reverse("judge_detail", args=["careful"])).status_code == 403
    client.force_login(alice)
    assert client.get(reverse("judge_detail", args=["nobody"])).status_code == 404


def test_the_api_reports_agreement_per_judge_and_prompt_version(client, charlie, two_judges):
    secret = api_token_create(user=charlie, name="trainer", scopes=["read"])[1]
    assert client.get("/api/v1/judges").status_code == 401
    rows = client.get("/api/v1/judges", HTTP_AUTHORIZATION=f"Bearer {secret}").json()
    by_key = {(row["judge"], row["prompt_version"]): row for row in rows}
    assert set(by_key) == {("careful", "v1"), ("careful", None), ("loose", "v1"), ("loose", None)}
    loose = by_key[("loose", None)]
    assert (loose["n"], loose["sampled"], loose["waiting"]) == (15, 15, 0)
    assert loose["false_pass"]["successes"] == 3 and loose["false_pass"]["n"] == 10
    assert loose["false_pass"]["estimate"] == pytest.approx(0.3) and loose["warning"] == "clearly above"
    assert loose["accuracy"]["estimate"] == pytest.approx(12 / 15)
    assert loose["kappa"]["low"] < loose["kappa"]["estimate"] < loose["kappa"]["high"]
    careful = by_key[("careful", "v1")]
    assert careful["waiting"] == 1 and careful["kappa"]["estimate"] == pytest.approx(1.0)
    assert careful["false_pass"]["estimate"] == 0.0 and careful["warning"] == ""


def test_a_judge_tasks_page_links_to_its_judge_and_the_bar_to_blind_review(client, alice, bob, arithmetic):
    task = judge_task(arithmetic, alice, "linked")
    shown = page(client, alice, reverse("task_detail", args=["arithmetic", "linked"]))
    assert reverse("judge_detail", args=["grader"]) in shown and task.key in shown
    assert reverse("blind_review_next") not in shown  # authors do not review blind
    assert reverse("blind_review_next") not in page(client, alice, reverse("judge_list"))
    assert reverse("blind_review_next") in page(client, bob, reverse("judge_list"))
