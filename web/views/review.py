"""Pages for reviewers: the review queue, decisions one by one or in bulk, and comment threads."""

from urllib.parse import urlencode

from django.contrib import messages
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from accounts.errors import ServiceError
from calibration import selectors as calibration_selectors
from calibration.models import Band, ProbeModel, Rollout
from curation import gameability, policy, selectors
from curation.models import Comment, Environment
from review import assignments
from review import selectors as review_selectors
from review import services as review_services
from review.models import Review
from similarity import selectors as similarity_selectors
from web.templatetags.display import band_label
from web.views import shared

QUEUE_FILTERS = ("environment", "band", "flag", "q")


def _queue_from_request(request):
    environment = None
    if request.GET.get("environment"):
        environment = get_object_or_404(Environment, name=request.GET["environment"])
    flag = request.GET.get("flag", "")
    # Near-duplicate and contamination flags live in the similarity app, a sibling of calibration.
    similarity_flag = flag if flag in similarity_selectors.FLAG_KINDS else ""
    queue = calibration_selectors.review_queue(
        user=request.user,
        environment=environment,
        band=request.GET.get("band", ""),
        flag="" if similarity_flag else flag,
        search=request.GET.get("q", "").strip(),
    )
    return similarity_selectors.tasks_filter_flag(queue, kind=similarity_flag) if similarity_flag else queue


def _queue_url(params, position: int) -> str:
    query = {name: params.get(name) for name in QUEUE_FILTERS if params.get(name)}
    query["position"] = position
    return reverse("review_queue") + "?" + urlencode(query)


# Approving these hands trainers a task the evidence does not put in the band: the button asks first.
CONFIRM_BANDS = {Band.TOO_HARD: "is too hard for the probe model", Band.UNDECIDED: "has no decided band yet"}


# Approval and releases agree: approving is a reviewer's judgement of the task and is always allowed, but
# a release holds only tasks a probe decided in band, so the button says what approving an unprobed or
# undecided task does and does not do (docs/review.md).
NOT_RELEASED = "no release will contain it until a probe decides it in band"


def _approve_confirm(task) -> str:
    """The question the Approve button asks first, or "" when the task's band is no reason to."""
    band = getattr(task, "band", None)
    if not band:
        return f"{task.key} has not been probed: approving it is allowed, but {NOT_RELEASED}. Approve it anyway?"
    reason = CONFIRM_BANDS.get(band)
    if reason is None:
        return ""
    released = f"; {NOT_RELEASED}" if band == Band.UNDECIDED else ""
    return f"{task.key} {reason} ({band_label(band)}){released}. Approve it anyway?"


@policy.page("review_queue")
def review_queue(request):
    queue = _queue_from_request(request)
    total = queue.count()
    position = int(request.GET["position"]) if request.GET.get("position", "").isdigit() else 0
    position = min(position, max(total - 1, 0))
    # The task under review is one of the upcoming rows: the queue is read once.
    upcoming_start = max(position - 5, 0)
    upcoming = shared.rows_by_ids(queue, upcoming_start, position + 15) if total else []
    task = upcoming[position - upcoming_start] if position - upcoming_start < len(upcoming) else None
    context = {
        "task": task,
        "total": total,
        "position": position,
        "upcoming": upcoming,
        "upcoming_start": upcoming_start,
        "filters": {name: request.GET.get(name, "") for name in QUEUE_FILTERS},
        "filter_query": urlencode({name: request.GET[name] for name in QUEUE_FILTERS if request.GET.get(name)}),
        "environments": Environment.objects.all(),
        "bands": Band.values,
        "flags": calibration_selectors.PRIORITIES[:-1]
        + [
            (selectors.GAMEABLE, "gameable verifier"),
            (calibration_selectors.FOUND_HACK, "found hack (impossible variant)"),
        ]
        + similarity_selectors.FLAG_CHOICES,
        "progress": review_selectors.reviewer_progress(),
        "previous_url": _queue_url(request.GET, position - 1) if position > 0 else "",
        "next_url": _queue_url(request.GET, position + 1) if position + 1 < total else "",
    }
    if task is not None:
        version = task.current_version
        context.update(
            version=version,
            calibrations=version.calibrations.select_related("probe_model") if version else [],
            rollouts=calibration_selectors.task_version_rollouts(task_version=version, limit=12),
            outcome_counts=calibration_selectors.outcome_counts(rollouts=Rollout.objects.filter(task_version=version)),
            threads=selectors.comment_threads(task=task),
            status_changes=task.status_changes.select_related("changed_by"),
            own_task=task.owner_id == request.user.pk and not request.user.is_staff,
            claim=assignments.claim_holder(task),
            defects=Review.Defect.choices,
            probe_models=ProbeModel.objects.all(),
            unprobed_fix=bool(version) and version.number > 1 and not version.calibrations.exists(),
            is_lead=policy.is_lead(request.user),
            approve_confirm=_approve_confirm(task),
            similarity_flags=similarity_selectors.version_flags(task_version=version, user=request.user),
            found_hacks=calibration_selectors.version_found_hacks(task_version_id=version.pk if version else None),
        )
    return render(request, "review/review_queue.html", context)


REVIEW_ACTIONS = {
    "claim": lambda task, reviewer, comment: review_services.review_claim(task=task, reviewer=reviewer),
    "release": lambda task, reviewer, comment: assignments.claim_release(task=task, by=reviewer),
    "approve": lambda task, reviewer, comment: review_services.review_approve(
        task=task, reviewer=reviewer, comment=comment
    ),
    "reject": lambda task, reviewer, comment, defect="other": review_services.review_reject(
        task=task, reviewer=reviewer, comment=comment, defect=defect
    ),
    "send_back": lambda task, reviewer, comment: review_services.review_send_back(
        task=task, reviewer=reviewer, comment=comment
    ),
    "override_gameable": lambda task, reviewer, comment: gameability.gameable_override(
        task=task, reviewer=reviewer, reason=comment
    ),
}
DONE_MESSAGES = {
    "claim": "is yours until your claim expires",
    "release": "is free for any reviewer",
    "approve": "was approved",
    "reject": "was rejected",
    "send_back": "was sent back to its author",
    "override_gameable": "may be approved despite its gameability flag",
}


@require_POST
@policy.page("review_action")
def review_action(request, environment_name: str, key: str, action: str):
    if action not in REVIEW_ACTIONS:
        raise Http404(f"Unknown review action {action!r}.")
    task = shared.task_for(request, policy.REVIEW, environment_name, key)
    try:
        # The page's form always names the defect; a client that does not gets "other".
        extra = {"defect": request.POST["defect"]} if action == "reject" and request.POST.get("defect") else {}
        done = REVIEW_ACTIONS[action](task, request.user, request.POST.get("comment", ""), **extra)
        if done is None and action in review_services.DECISIONS and action != "send_back":
            messages.success(request, f"{task.key}: your decision is kept blind until a second reviewer gives theirs.")
        else:
            messages.success(request, f"{task.key} {DONE_MESSAGES[action]}.")
    except ServiceError as error:
        messages.error(request, str(error))
    if request.POST.get("next") == "task":
        return redirect("task_detail", environment_name=environment_name, key=key)
    position = int(request.POST["position"]) if request.POST.get("position", "").isdigit() else 0
    return redirect(_queue_url(request.POST, position))


@require_POST
@policy.page("review_bulk")
def review_bulk(request):
    decision = request.POST.get("decision", "")
    # The filter travels in the query string so that "everything matching" means the same as on the page.
    queue = _queue_from_request(request)
    try:
        result = review_services.reviews_bulk(
            tasks=queue, reviewer=request.user, decision=decision, comment=request.POST.get("comment", "")
        )
    except ServiceError as error:
        messages.error(request, str(error))
    else:
        label = {"approve": "approved", "reject": "rejected", "send_back": "sent back"}[decision]
        messages.success(request, f"{len(result.decided)} task(s) {label}; {len(result.skipped)} skipped.")
        for line in result.skipped[:20]:
            messages.warning(request, line)
    return redirect(_queue_url(request.GET, 0))


@require_POST
@policy.page("comment_create")
def comment_create(request, environment_name: str, key: str):
    task = shared.task_for(request, policy.DISCUSS, environment_name, key)
    parent = None
    if request.POST.get("parent", "").isdigit():
        parent = get_object_or_404(Comment, pk=int(request.POST["parent"]), task=task)
    try:
        review_services.comment_add(task=task, author=request.user, body=request.POST.get("body", ""), parent=parent)
    except ServiceError as error:
        messages.error(request, str(error))
    return shared.back(request, task)


@require_POST
@policy.page("comment_resolve")
def comment_resolve(request, comment_id: int):
    comments = Comment.objects.select_related("task__environment")
    comment = policy.get_for(request.user, policy.CHANGE, comments, pk=comment_id)
    try:
        review_services.comment_resolve(comment=comment, by=request.user)
    except ServiceError as error:
        messages.error(request, str(error))
    return shared.back(request, comment.task)
