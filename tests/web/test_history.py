"""History: the audit log records who did what (review decisions, edits, tokens, release builds, role
changes, reassignments) and only staff read it, filtered; a diff between two releases on a page and in
the API.

alice authors, bob reviews, lena leads, charlie trains, sam is staff.
"""

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from accounts.models import AuditEvent
from accounts.services import api_token_create, api_token_revoke
from calibration.models import Calibration
from curation.models import Task, TaskStatus
from curation.services import task_version_edit
from releases import selectors as release_selectors
from releases import services as releases
from review import assignments
from review import services as review_services
from tests.releases.export_data import calibrated_environment
from tests.review.test_review import submitted

pytestmark = pytest.mark.django_db


def events():
    return list(AuditEvent.objects.order_by("id").values_list("actor__username", "action", "object_label"))


def test_review_decisions_claims_and_tokens_are_recorded(alice, bob, lena, arithmetic):
    first, second = submitted(arithmetic, alice, "t-1", "t-2")
    review_services.review_approve(task=first, reviewer=bob)
    assignments.claim_take(task=second, reviewer=bob)
    assignments.claim_reassign(task=second, to_reviewer=lena, by=lena)
    review_services.review_reject(task=second, reviewer=lena, comment="wrong answer")
    token, _ = api_token_create(user=bob, name="ci", scopes=["read"])
    api_token_revoke(token=token)
    recorded = events()
    assert ("bob", "approve", "arithmetic/t-1") in recorded
    assert ("lena", "reassign", "arithmetic/t-2") in recorded
    assert ("lena", "reject", "arithmetic/t-2") in recorded
    assert [row[:2] for row in recorded[-2:]] == [("bob", "token_create"), ("bob", "token_revoke")]
    reject = AuditEvent.objects.get(action="reject")
    assert reject.detail == {"from": "in_review", "to": "rejected", "reason": "wrong answer"}


def test_role_changes_in_the_admin_are_recorded_with_who_made_them(client, bob, staff):
    staff.is_superuser = True
    staff.save()
    client.force_login(staff)
    url = reverse("admin:auth_user_change", args=[bob.pk])
    form = client.get(url).context["adminform"].form
    data = {
        "username": "bob",
        "is_active": "on",
        "groups": [Group.objects.get_or_create(name="leads")[0].pk],
        "date_joined_0": form.initial["date_joined"].strftime("%Y-%m-%d"),
        "date_joined_1": form.initial["date_joined"].strftime("%H:%M:%S"),
    }
    response = client.post(url, data)
    assert response.status_code == 302, response.content.decode()[:2000]
    event = AuditEvent.objects.get(action="role_change", actor=staff)
    assert event.object_label == "bob"
    assert event.detail == {"added": ["leads"], "removed": ["reviewers"], "before": ["reviewers"], "after": ["leads"]}


def test_only_staff_read_the_log_and_filter_it(client, alice, bob, staff, arithmetic):
    first, second = submitted(arithmetic, alice, "t-1", "t-2")
    review_services.review_approve(task=first, reviewer=bob)
    review_services.review_reject(task=second, reviewer=bob, comment="duplicate")
    client.force_login(bob)
    assert client.get(reverse("audit_log")).status_code == 403
    client.force_login(staff)
    page = client.get(reverse("audit_log"), {"action": "reject"}).content.decode()
    assert "arithmetic/t-2" in page and "duplicate" in page and "arithmetic/t-1" not in page
    page = client.get(reverse("audit_log"), {"kind": "task", "object": first.pk}).content.decode()
    assert "arithmetic/t-1" in page and "arithmetic/t-2" not in page and "submit" in page
    page = client.get(reverse("audit_log"), {"actor": "alice"}).content.decode()
    assert "approve" not in page.split('id="audit-events"')[1]
    assert client.get(reverse("audit_log"), {"since": "yesterday"}).status_code == 400


@pytest.fixture
def two_releases(arithmetic, alice, charlie, settings, tmp_path, django_capture_on_commit_callbacks):
    """Release A: sum v1 and product (in band). Then product is outgrown, capital comes into the band and
    sum gets a second version; release B: sum v2 and capital."""
    settings.MEDIA_ROOT = tmp_path / "media"
    model = calibrated_environment(arithmetic, alice)
    with django_capture_on_commit_callbacks(execute=False):
        old = releases.release_create(user=charlie, probe_model=model, environment=arithmetic)
    old = releases.release_build(release_id=old.pk)
    Calibration.objects.filter(task_version__task__key="product").update(band="retire")
    Calibration.objects.filter(task_version__task__key="capital").update(
        band="in_band", attempts=40, successes=20, pass_rate=0.5
    )
    total = Task.objects.get(key="sum")
    Task.objects.filter(pk=total.pk).update(status=TaskStatus.DRAFT)
    total.refresh_from_db()
    content = {"prompt": "What is 2 + 4?", "answer": "6", "verifier": {"kind": "math"}}
    version = task_version_edit(task=total, by=alice, content=content, run_audit=False)
    Task.objects.filter(pk=total.pk).update(status=TaskStatus.APPROVED)
    calibration = Calibration.objects.get(task_version__task__key="product")
    calibration.pk, calibration.task_version, calibration.band = None, version, "in_band"
    calibration.save()
    with django_capture_on_commit_callbacks(execute=False):
        new = releases.release_create(user=charlie, probe_model=model, environment=arithmetic)
    new = releases.release_build(release_id=new.pk)
    return old, new


def test_a_release_diff_lists_added_removed_and_changed_tasks(client, charlie, bob, two_releases):
    old, new = two_releases
    diff = release_selectors.release_diff(old=old, new=new)
    assert [(row.key, row.new_version, row.new_band) for row in diff.added] == [("capital", 1, "in_band")]
    assert [(row.key, row.old_version, row.old_band) for row in diff.removed] == [("product", 1, "in_band")]
    assert [(row.key, row.old_version, row.new_version) for row in diff.changed] == [("sum", 1, 2)]
    assert diff.unchanged == 0
    assert [event.action for event in AuditEvent.objects.filter(object_kind="release")] == ["release_build"] * 2

    client.force_login(charlie)
    page = client.get(reverse("release_diff", args=[new.pk]), {"against": old.pk}).content.decode()
    assert "1 added · 1 removed · 1 changed" in page and "v1 → v2" in page
    assert client.get(reverse("release_diff", args=[new.pk])).status_code == 400
    client.force_login(bob)
    assert client.get(reverse("release_diff", args=[new.pk]), {"against": old.pk}).status_code == 403

    _, secret = api_token_create(user=charlie, name="t", scopes=["export"])
    answer = client.get(
        reverse("api_release_diff", args=[new.pk]), {"against": old.pk}, HTTP_AUTHORIZATION=f"Bearer {secret}"
    ).json()
    assert answer == diff.as_dict()
    assert answer["changed"][0] == {
        "environment": "arithmetic",
        "key": "sum",
        "old_version": 1,
        "new_version": 2,
        "old_band": "in_band",
        "new_band": "in_band",
    }


def test_band_changes_are_recorded(alice, arithmetic):
    from calibration.models import ProbeModel
    from calibration.services import calibration_refresh
    from tests.factories import rollouts_with

    (task,) = submitted(arithmetic, alice, "t-1")
    rollouts_with(task, alice, ["pass"] * 2 + ["fail"] * 2)  # 2 of 4: undecided, nothing recorded
    model = ProbeModel.objects.get(name="probe")
    assert calibration_refresh(task_version=task.current_version, probe_model=model).band == "undecided"
    assert not AuditEvent.objects.filter(action="band_change").exists()
    rollouts_with(task, alice, ["pass"] * 60)  # passes nearly always now
    band = calibration_refresh(task_version=task.current_version, probe_model=model).band
    assert band == "retire"
    (event,) = AuditEvent.objects.filter(action="band_change")
    assert (event.object_label, event.object_id) == ("arithmetic/t-1", task.pk)
    assert event.detail == {"from": "undecided", "to": "retire", "model": "probe", "version": 1}
    calibration_refresh(task_version=task.current_version, probe_model=model)  # the same band again
    assert AuditEvent.objects.filter(action="band_change").count() == 1
