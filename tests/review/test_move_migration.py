"""The review models' move out of curation keeps every row: a database migrated to the state before the move,
filled under curation's labels, then migrated forward (and back, and forward again). Runs on either engine."""

from datetime import timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

# curation before the move, and the admin log (with auth and contenttypes) as they are.
BEFORE_MOVE = [("curation", "0024_task_version_weak_tests"), ("admin", "0003_logentry_add_action_flag_choices")]
MOVED = ("review", "blinditem", "blindreview", "adjudication", "reviewclaim", "reviewerdomain", "notification")
pytestmark = pytest.mark.django_db(transaction=True)


def _migrate(targets):
    """Migrate the test database to `targets`; returns the historical apps at those nodes."""
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    executor.loader.build_graph()
    return executor.loader.project_state(targets).apps


def _latest():
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


def _fill(apps) -> dict:
    """One row of every moved model under curation's labels, with a permission, a group grant and an
    admin log entry pointing at the Review; returns the ids to look for after the move."""
    User = apps.get_model("auth", "User")
    model = {name: apps.get_model("curation", name) for name in MOVED}
    author = User.objects.create(username="mover-alice")
    reviewer = User.objects.create(username="mover-bob")
    lead = User.objects.create(username="mover-lena")
    environment = apps.get_model("curation", "Environment").objects.create(name="moves", floor=0.05, retire_at=0.7)
    task = apps.get_model("curation", "Task").objects.create(environment=environment, key="t/1", owner=author)
    version = apps.get_model("curation", "TaskVersion").objects.create(
        task=task, number=1, prompt=[{"role": "user", "content": "2+2?"}], answer="4", verifier={}, domain="math",
        content_hash="h", created_by=author,
    )  # fmt: skip
    comment = apps.get_model("curation", "Comment").objects.create(task=task, author=reviewer, body="@mover-alice")
    now = timezone.now()
    review = model["review"].objects.create(
        task=task, task_version=version, reviewer=reviewer, decision="reject", defect="wrong_answer", comment="no"
    )
    item = model["blinditem"].objects.create(
        kind="double_review", object_id=version.pk, task_version=version, content="", decided_by="mover-bob",
        decision="fail", decided_note="wrong", decided_defect="wrong_answer", reviews_wanted=1,
    )  # fmt: skip
    blind = model["blindreview"].objects.create(item=item, reviewer=lead, verdict="pass", note="fine")
    adjudication = model["adjudication"].objects.create(item=item, lead=lead, decision="fail", comment="settled")
    claim = model["reviewclaim"].objects.create(
        task=task, reviewer=reviewer, how="round_robin", assigned_by=lead, claimed_at=now,
        expires_at=now + timedelta(hours=1),
    )  # fmt: skip
    domain = model["reviewerdomain"].objects.create(reviewer=reviewer, domain="math")
    notification = model["notification"].objects.create(
        recipient=author, actor=reviewer, kind="mention", task=task, comment=comment
    )
    ContentType = apps.get_model("contenttypes", "ContentType")
    content_type, _ = ContentType.objects.get_or_create(app_label="curation", model="review")
    Permission = apps.get_model("auth", "Permission")
    permission, _ = Permission.objects.get_or_create(
        content_type=content_type, codename="change_review", defaults={"name": "Can change review"}
    )
    group = apps.get_model("auth", "Group").objects.create(name="mover-editors")
    group.permissions.add(permission)
    entry = apps.get_model("admin", "LogEntry").objects.create(
        user=lead, content_type=content_type, object_id=str(review.pk), object_repr="reject", action_flag=2
    )
    return {
        "users": (author.pk, reviewer.pk, lead.pk),
        "task": task.pk,
        "version": version.pk,
        "comment": comment.pk,
        "review": review.pk,
        "item": item.pk,
        "blind": blind.pk,
        "adjudication": adjudication.pk,
        "claim": claim.pk,
        "domain": domain.pk,
        "notification": notification.pk,
        "content_type": content_type.pk,
        "permission": permission.pk,
        "group": group.pk,
        "entry": entry.pk,
    }


def _check_moved(ids: dict) -> None:
    """Every row filled before the move reads back through the review app's models, with its foreign keys,
    and the content type, permission, grant and log entry now say review."""
    from django.contrib.admin.models import LogEntry
    from django.contrib.auth.models import Group, Permission
    from django.contrib.contenttypes.models import ContentType

    from review.models import Adjudication, BlindItem, BlindReview, Notification, Review, ReviewClaim, ReviewerDomain

    author, reviewer, lead = ids["users"]
    review = Review.objects.get(pk=ids["review"])
    assert (review.task_id, review.task_version_id, review.reviewer_id) == (ids["task"], ids["version"], reviewer)
    assert (review.decision, review.defect, review.comment) == ("reject", "wrong_answer", "no")
    item = BlindItem.objects.get(pk=ids["item"])
    assert (item.task_version_id, item.kind, item.decided_note) == (ids["version"], "double_review", "wrong")
    blind = BlindReview.objects.get(pk=ids["blind"])
    assert (blind.item_id, blind.reviewer_id, blind.verdict) == (ids["item"], lead, "pass")
    assert Adjudication.objects.get(pk=ids["adjudication"]).item.adjudication.comment == "settled"
    claim = ReviewClaim.objects.get(pk=ids["claim"])
    assert (claim.task_id, claim.reviewer_id, claim.assigned_by_id, claim.how) == (
        ids["task"], reviewer, lead, "round_robin",
    )  # fmt: skip
    assert ReviewerDomain.objects.get(pk=ids["domain"]).reviewer_id == reviewer
    notification = Notification.objects.get(pk=ids["notification"])
    assert (notification.recipient_id, notification.actor_id, notification.comment_id) == (
        author, reviewer, ids["comment"],
    )  # fmt: skip
    assert list(review.task.reviews.all()) == [review] and review.task.review_claim == claim

    ContentType.objects.clear_cache()
    content_type = ContentType.objects.get_for_model(Review)
    assert (content_type.pk, content_type.app_label) == (ids["content_type"], "review")
    assert not ContentType.objects.filter(app_label="curation", model__in=MOVED).exists()
    permission = Permission.objects.get(pk=ids["permission"])
    assert permission.content_type_id == ids["content_type"]
    assert list(Group.objects.get(pk=ids["group"]).permissions.all()) == [permission]
    assert Group.objects.get(pk=ids["group"]).permissions.filter(content_type__app_label="review").exists()
    entry = LogEntry.objects.get(pk=ids["entry"])
    assert entry.content_type_id == ids["content_type"] and entry.get_edited_object() == review


def test_the_move_keeps_every_row_permission_and_log_entry():
    try:
        before = _migrate(BEFORE_MOVE)
        ids = _fill(before)
        _migrate(_latest())
        _check_moved(ids)

        # Backwards: the labels return to curation, the rows stay; then forward again, as a deploy that
        # was rolled back and redone.
        back = _migrate(BEFORE_MOVE)
        ContentType = back.get_model("contenttypes", "ContentType")
        assert ContentType.objects.get(pk=ids["content_type"]).app_label == "curation"
        assert back.get_model("curation", "Review").objects.get(pk=ids["review"]).comment == "no"
        _migrate(_latest())
        _check_moved(ids)
    finally:
        _migrate(_latest())


def test_a_content_type_made_under_review_before_the_move_is_merged_into_the_old_one():
    """A database where post_migrate already made review's rows (the app seen before its data migration ran):
    the old row keeps its id and permissions; the extra row's own permissions and log entries join it."""
    try:
        apps = _migrate(BEFORE_MOVE)
        ContentType = apps.get_model("contenttypes", "ContentType")
        Permission = apps.get_model("auth", "Permission")
        old, _ = ContentType.objects.get_or_create(app_label="curation", model="notification")
        Permission.objects.get_or_create(content_type=old, codename="view_notification", defaults={"name": "v"})
        extra, _ = ContentType.objects.get_or_create(app_label="review", model="notification")
        Permission.objects.get_or_create(content_type=extra, codename="view_notification", defaults={"name": "v"})
        kept_extra, _ = Permission.objects.get_or_create(
            content_type=extra, codename="mute_notification", defaults={"name": "m"}
        )
        _migrate(_latest())

        from django.contrib.auth.models import Permission as CurrentPermission
        from django.contrib.contenttypes.models import ContentType as CurrentContentType

        from review.models import Notification

        CurrentContentType.objects.clear_cache()
        merged = CurrentContentType.objects.get_for_model(Notification)
        assert merged.pk == old.pk and not CurrentContentType.objects.filter(pk=extra.pk).exists()
        codenames = sorted(CurrentPermission.objects.filter(content_type=merged).values_list("codename", flat=True))
        assert "view_notification" in codenames and "mute_notification" in codenames
        assert CurrentPermission.objects.get(pk=kept_extra.pk).content_type_id == old.pk
    finally:
        _migrate(_latest())
