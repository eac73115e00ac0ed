"""{% load notifications %}{% unread_notifications user as unread %}: the top bar's count of unread notifications."""

from django import template

from review.notifications import unread_count

register = template.Library()


@register.simple_tag
def unread_notifications(user) -> int:
    return unread_count(user)
