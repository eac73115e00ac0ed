"""Notifications in the app: a comment that @mentions someone tells them (pages and API alike).

A mention is ``@username`` (letters, digits and . @ + - _ as Django usernames allow). It notifies
an active user who may see the task (curation.policy), never the comment's own author; mentioning
someone twice in one comment notifies once.
"""

from __future__ import annotations

import re

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet
from django.utils import timezone

from curation import policy
from curation.models import Comment
from review.models import Notification

MENTION = re.compile(r"(?<![\w.+-])@([\w.@+-]*\w)")


def mentioned_usernames(body: str) -> list[str]:
    """The usernames ``@mentioned`` in `body`, in order of first mention, each once."""
    return list(dict.fromkeys(MENTION.findall(body)))


def mentions_notify(*, comment: Comment) -> list[Notification]:
    """Notify everyone `comment` mentions who may see its task; returns the notifications made."""
    names = mentioned_usernames(comment.body)
    if not names:
        return []
    people = get_user_model().objects.filter(username__in=names, is_active=True).exclude(pk=comment.author_id)
    made = []
    for person in people:
        if not policy.task_may_see(person, comment.task):
            continue  # a mention must not leak a task to someone who may not see it
        notification, created = Notification.objects.get_or_create(
            recipient=person,
            comment=comment,
            kind=Notification.Kind.MENTION,
            defaults={"actor_id": comment.author_id, "task": comment.task},
        )
        if created:
            made.append(notification)
    return made


def notifications_for(*, user: AbstractBaseUser, unread_only: bool = False) -> QuerySet[Notification]:
    """`user`'s notifications, newest first."""
    notifications = Notification.objects.filter(recipient=user).select_related("actor", "task__environment", "comment")
    return notifications.filter(read_at__isnull=True) if unread_only else notifications


def unread_count(user: AbstractBaseUser) -> int:
    return Notification.objects.filter(recipient=user, read_at__isnull=True).count() if user.is_authenticated else 0


def notifications_mark_read(*, user: AbstractBaseUser, ids: list[int] | None = None) -> int:
    """Mark `user`'s notifications read (all of them, or those in `ids`); returns how many changed."""
    unread = Notification.objects.filter(recipient=user, read_at__isnull=True)
    if ids is not None:
        unread = unread.filter(pk__in=ids)
    return unread.update(read_at=timezone.now())
