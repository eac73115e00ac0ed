"""POST /api/v1/verify: score completions with Passband's verifiers."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from curation import policy
from engine import verifiers

MAX_COMPLETIONS = 100


class VerifyRequest(serializers.Serializer):
    task = serializers.CharField(
        required=False, help_text="Task key; its current version's verifier, answer and prompt are used."
    )
    environment = serializers.CharField(required=False, help_text="Environment name, when a task key is ambiguous.")
    verifier = serializers.JSONField(required=False)
    answer = serializers.CharField(required=False, allow_blank=True, allow_null=True)
    prompt = serializers.JSONField(
        required=False,
        allow_null=True,
        help_text="With 'verifier': the task's prompt (text or chat messages). With 'task', its own prompt is used.",
    )
    tools = serializers.ListField(
        child=serializers.DictField(),
        required=False,
        help_text="With 'verifier': the tools the task offers; a completion calling another one fails. With 'task', "
        "its own tools are used.",
    )
    completion = serializers.JSONField(
        required=False, help_text="The text to grade, a chat message, or a list of messages."
    )
    completions = serializers.ListField(
        child=serializers.JSONField(),
        required=False,
        min_length=1,
        max_length=MAX_COMPLETIONS,
        help_text="Several completions of the one task, graded together (repository tasks: one sandbox run "
        "for many patches); the answer is {'verdicts': [...]} in their order.",
    )

    def validate(self, data):
        if ("completion" in data) == ("completions" in data):
            raise serializers.ValidationError("Send either 'completion' or 'completions', not both or neither.")
        if bool(data.get("task")) == bool(data.get("verifier")):
            raise serializers.ValidationError("Send either 'task' or 'verifier' (with 'answer'), not both or neither.")
        if data.get("task") and data.get("prompt") is not None:
            raise serializers.ValidationError(
                {"prompt": "A task's own prompt is used; send 'prompt' only with 'verifier'."}
            )
        prompt = data.get("prompt")
        if prompt is not None and not isinstance(prompt, (str, list)):
            raise serializers.ValidationError({"prompt": "Must be text or a list of chat messages."})
        return data


class VerdictResponse(serializers.Serializer):
    outcome = serializers.ChoiceField(choices=["pass", "fail", "error", "timeout", "tampered"])
    reward = serializers.FloatField(allow_null=True)
    detail = serializers.CharField()
    latency_ms = serializers.FloatField()


@policy.api("api_verify")
class Verify(APIView):
    """POST /api/v1/verify: grade a completion ({outcome, reward, detail, latency_ms}) or several of one
    task ({"verdicts": [...]})."""

    @extend_schema(request=VerifyRequest, responses=VerdictResponse)
    def post(self, request):
        body = VerifyRequest(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        if data.get("task"):
            tasks = policy.tasks_visible_to(request.user).filter(key=data["task"], current_version__isnull=False)
            if data.get("environment"):
                tasks = tasks.filter(environment__name=data["environment"])
            matches = list(tasks.select_related("current_version")[:2])
            if not matches:
                raise NotFound(f"No task {data['task']!r} visible to you.")
            if len(matches) > 1:
                raise ValidationError({"environment": ["That key exists in several environments; add 'environment'."]})
            version = matches[0].current_version
            verifier, answer, prompt, tools = version.verifier, version.answer, version.prompt, version.tools
        else:
            verifier, answer, prompt = data["verifier"], data.get("answer"), data.get("prompt")
            tools = data.get("tools")
        try:
            # The prompt as the probe passes it (the math verifier refuses an answer that restates it), and the
            # tools: only offered tools run, in a replay too.
            if "completions" in data:
                verdicts = verifiers.verify_many(
                    verifier=verifier, completions=data["completions"], answer=answer, prompt=prompt, tools=tools
                )
                return Response({"verdicts": [verdict.to_dict() for verdict in verdicts]})
            verdict = verifiers.verify(
                verifier=verifier, completion=data["completion"], answer=answer, prompt=prompt, tools=tools
            )
        except verifiers.VerifierConfigError as error:
            raise ValidationError({"verifier": [str(error)]}) from None
        return Response(verdict.to_dict())
