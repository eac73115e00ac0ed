"""Comments over the API as on the pages (threads, replies, @mentions that notify), and the caller's
notifications."""

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.errors import ServiceError
from curation import policy
from curation.models import Comment, Task
from review import notifications
from review import services as review_services
from review.models import Notification


class CommentSerializer(serializers.ModelSerializer):
    author = serializers.CharField(source="author.username")
    resolved_by = serializers.CharField(source="resolved_by.username", default=None)

    class Meta:
        model = Comment
        fields = ["id", "parent", "author", "body", "created_at", "resolved_at", "resolved_by"]


class CommentRequest(serializers.Serializer):
    environment = serializers.CharField(help_text="Environment name.")
    key = serializers.CharField(help_text="Task key.")
    body = serializers.CharField(help_text="Markdown; @username mentions notify that person.")
    parent = serializers.IntegerField(required=False, help_text="Reply to this comment's thread.")


class NotificationSerializer(serializers.ModelSerializer):
    actor = serializers.CharField(source="actor.username")
    task = serializers.SerializerMethodField()
    comment = serializers.CharField(source="comment.body", default=None)

    class Meta:
        model = Notification
        fields = ["id", "kind", "actor", "task", "comment", "created_at", "read_at"]

    def get_task(self, notification) -> str:
        return f"{notification.task.environment.name}/{notification.task.key}"


class ReadRequest(serializers.Serializer):
    ids = serializers.ListField(child=serializers.IntegerField(), required=False, help_text="Default: every one.")


def _task(request, environment_name: str, key: str, action: str) -> Task:
    tasks = Task.objects.select_related("environment")
    return policy.get_for(request.user, action, tasks, environment__name=environment_name, key=key)


@policy.api("api_task_comments")
class TaskComments(APIView):
    """GET /api/v1/tasks/<environment>/<key>/comments: the task's comments, oldest first (replies name
    their thread's root as `parent`)."""

    @extend_schema(responses=CommentSerializer(many=True))
    def get(self, request, environment_name: str, key: str):
        task = _task(request, environment_name, key, policy.SEE)
        comments = task.comments.select_related("author", "resolved_by")
        return Response(CommentSerializer(comments, many=True).data)


@policy.api("api_comment_create")
class CommentCreate(APIView):
    """POST /api/v1/comments: comment on a task (its author and reviewers), or reply with `parent`;
    answers the comment and who its @mentions notified."""

    @extend_schema(request=CommentRequest, responses={201: CommentSerializer})
    def post(self, request):
        data = CommentRequest(data=request.data)
        data.is_valid(raise_exception=True)
        params = data.validated_data
        task = _task(request, params["environment"], params["key"], policy.DISCUSS)
        parent = get_object_or_404(Comment, pk=params["parent"], task=task) if "parent" in params else None
        try:
            comment = review_services.comment_add(task=task, author=request.user, body=params["body"], parent=parent)
        except ServiceError as error:
            raise ValidationError({"body": [str(error)]}) from None
        notified = Notification.objects.filter(comment=comment).values_list("recipient__username", flat=True)
        return Response(
            {**CommentSerializer(comment).data, "notified": sorted(notified)}, status=status.HTTP_201_CREATED
        )


@policy.api("api_notification_list")
class NotificationList(APIView):
    """GET /api/v1/notifications[?unread=1]: the caller's notifications, newest first (at most 200)."""

    @extend_schema(responses=NotificationSerializer(many=True))
    def get(self, request):
        unread = request.query_params.get("unread", "") in ("1", "true")
        rows = notifications.notifications_for(user=request.user, unread_only=unread)[:200]
        return Response(NotificationSerializer(rows, many=True).data)


@policy.api("api_notification_read")
class NotificationRead(APIView):
    """POST /api/v1/notifications/read: mark the caller's notifications read (`ids`, or all)."""

    @extend_schema(request=ReadRequest, responses={200: dict})
    def post(self, request):
        data = ReadRequest(data=request.data)
        data.is_valid(raise_exception=True)
        changed = notifications.notifications_mark_read(user=request.user, ids=data.validated_data.get("ids"))
        return Response({"marked_read": changed})
