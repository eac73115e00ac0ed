"""Fix and accept: a reviewer corrects a task under review into a new, re-audited version (the old
version keeps its rollouts), then approves it; every reject and fix names a defect; defect rates per
author and environment.

alice authors, bob and dora review, ed is a second author.
"""

import pytest
from django.urls import reverse

from calibration.models import Campaign, CampaignItem, ProbeModel, Rollout
from curation.errors import CurationError
from curation.models import TaskStatus
from curation.services import environment_create
from review import defects
from review import services as review_services
from review.models import Review
from tests.conftest import make_user
from tests.factories import rollouts_with
from tests.review.test_review import submitted

pytestmark = pytest.mark.django_db

FIXED = {"prompt": "What is 2 + 2?", "answer": "4", "verifier": {"kind": "math"}}


def test_a_fix_makes_a_new_audited_version_and_the_old_keeps_its_rollouts(alice, bob, arithmetic):
    (task,) = submitted(arithmetic, alice, "t-1")
    old = task.current_version
    rollouts_with(task, alice, ["pass", "fail"])
    version = review_services.review_fix(
        task=task, reviewer=bob, content=FIXED, defect="wrong_answer", comment="answer was off"
    )
    task.refresh_from_db()
    assert (task.current_version, version.number, task.status) == (version, 2, TaskStatus.IN_REVIEW)
    assert version.audit_passed is True and version.answer == "4" and version.created_by == bob
    assert Rollout.objects.filter(task_version=old).count() == 2
    assert not Rollout.objects.filter(task_version=version).exists()
    fix = Review.objects.get()
    assert (fix.decision, fix.defect, fix.task_version) == ("fix", "wrong_answer", old)
    # ...and accept: the fixer approves the new version.
    review_services.review_approve(task=task, reviewer=bob)
    task.refresh_from_db()
    assert task.status == TaskStatus.APPROVED
    assert Review.objects.filter(decision="approve").get().task_version == version


def test_a_fix_that_fails_its_audit_is_saved_and_cannot_be_approved(alice, bob, arithmetic):
    (task,) = submitted(arithmetic, alice, "t-1")
    broken = {**FIXED, "verifier": {"kind": "regex", "pattern": ".*"}}  # an empty answer passes it too
    version = review_services.review_fix(task=task, reviewer=bob, content=broken, defect="other")
    assert version.audit_passed is False
    with pytest.raises(CurationError, match="failed its audit"):
        review_services.review_approve(task=task, reviewer=bob)


def test_fix_refusals_name_what_is_wrong(alice, bob, arithmetic):
    (task,) = submitted(arithmetic, alice, "t-1")
    with pytest.raises(CurationError, match="Name the defect"):
        review_services.review_fix(task=task, reviewer=bob, content=FIXED, defect="")
    with pytest.raises(CurationError, match="Only reviewers"):
        review_services.review_fix(task=task, reviewer=alice, content=FIXED, defect="other")
    with pytest.raises(CurationError, match="verifier"):
        review_services.review_fix(
            task=task, reviewer=bob, content={**FIXED, "verifier": {"kind": "nope"}}, defect="other"
        )
    with pytest.raises(CurationError, match="Nothing changed"):
        current = task.current_version
        review_services.review_fix(
            task=task,
            reviewer=bob,
            content={"prompt": current.prompt, "answer": current.answer, "verifier": current.verifier},
            defect="other",
        )
    task.refresh_from_db()
    assert task.current_version.number == 1 and not Review.objects.exists()


def test_a_reject_names_its_defect(alice, bob, arithmetic):
    (task,) = submitted(arithmetic, alice, "t-1")
    with pytest.raises(CurationError, match="Name the defect"):
        review_services.review_reject(task=task, reviewer=bob, comment="no", defect="boring")
    review_services.review_reject(task=task, reviewer=bob, comment="leaked", defect="leaked_benchmark")
    assert Review.objects.get().defect == "leaked_benchmark"


def test_defect_rates_per_author_and_environment(django_user_model, alice, bob, arithmetic):
    ed = make_user(django_user_model, "ed", "authors")
    code = environment_create(name="snippets", domain="code", default_verifier={"kind": "math"})
    tasks = submitted(arithmetic, alice, "a-1", "a-2", "a-3", "a-4")
    (eds,) = submitted(code, ed, "e-1")
    review_services.review_approve(task=tasks[0], reviewer=bob)
    review_services.review_approve(task=tasks[1], reviewer=bob)
    review_services.review_reject(task=tasks[2], reviewer=bob, comment="x", defect="duplicate")
    review_services.review_fix(task=tasks[3], reviewer=bob, content=FIXED, defect="ambiguous_prompt")
    review_services.review_reject(task=eds, reviewer=bob, comment="y", defect="gameable_verifier")
    rates = {row.name: row for row in defects.defect_rates(group="author", viewer=bob)}
    assert (rates["alice"].rate.successes, rates["alice"].rate.n) == (2, 4)
    assert rates["alice"].by_defect["duplicate"] == 1 and rates["alice"].by_defect["ambiguous_prompt"] == 1
    assert (rates["ed"].rate.successes, rates["ed"].rate.n, rates["ed"].rate.estimate) == (1, 1, 1.0)
    by_environment = {row.name: row.rate.n for row in defects.defect_rates(group="environment", viewer=bob)}
    assert by_environment == {"arithmetic": 4, "snippets": 1}
    # An author sees their own row only.
    assert [row.name for row in defects.defect_rates(group="author", viewer=ed)] == ["ed"]


def test_fix_and_reprobe_on_the_queue_page(client, alice, bob, arithmetic):
    submitted(arithmetic, alice, "t-1")
    ProbeModel.objects.create(name="probe", backend="openai", base_url="http://127.0.0.1:9/v1")
    client.force_login(bob)
    page = client.get(reverse("review_queue")).content.decode()
    assert 'id="fix-form"' in page and 'id="reprobe-form"' not in page
    response = client.post(
        reverse("review_fix", args=["arithmetic", "t-1"]),
        {
            "prompt": "What is 2 + 2?",
            "answer": "4",
            "verifier": "{not json",
            "defect": "wrong_answer",
            "next": "/review/",
        },
        follow=True,
    )
    assert "verifier: not valid JSON" in response.content.decode()
    response = client.post(
        reverse("review_fix", args=["arithmetic", "t-1"]),
        {"prompt": "What is 2 + 2?", "answer": "4", "verifier": '{"kind": "math"}', "defect": "wrong_answer"},
        follow=True,
    )
    page = response.content.decode()
    assert "is now version 2 (its audit passed)" in page
    page = client.get(reverse("review_queue")).content.decode()
    assert 'id="reprobe-form"' in page and "v2 is not probed yet" in page
    client.post(reverse("review_reprobe", args=["arithmetic", "t-1"]), {"model": "probe", "next": "/review/"})
    campaign = Campaign.objects.get()
    assert list(CampaignItem.objects.filter(campaign=campaign).values_list("task_version__number", flat=True)) == [2]
    client.force_login(alice)
    assert client.post(reverse("review_fix", args=["arithmetic", "t-1"]), {"defect": "other"}).status_code == 403
    assert client.get(reverse("defect_rates")).status_code == 200
