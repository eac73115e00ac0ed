"""Pages of the team's review workbench: who holds what (leads), second blind reviews, agreement
between reviewers, the adjudication queue and gold items. docs/review.md."""

import json

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from accounts.errors import ServiceError
from calibration.models import ProbeModel
from curation import policy
from curation.models import Task
from review import assignments, defects, double_review, notifications
from review import services as review_services
from review.models import BlindItem, Review
from web.views import shared


def _reviewer(pk: str):
    return get_object_or_404(get_user_model(), pk=int(pk) if pk.isdigit() else 0)


def _task(pk: str) -> Task:
    return get_object_or_404(Task.objects.select_related("environment"), pk=int(pk) if pk.isdigit() else 0)


def _claims_post(request) -> str:
    """Carry out one lead action of the claims page; returns the message saying what happened."""
    action = request.POST.get("action", "")
    if action == "assign":
        result = assignments.queue_assign(
            tasks=Task.objects.all(), strategy=request.POST.get("strategy", ""), by=request.user
        )
        for line in result.unassigned[:20]:
            messages.warning(request, line)
        return f"{result.count} task(s) assigned; {len(result.unassigned)} left unassigned."
    if action == "reassign":
        task, reviewer = _task(request.POST.get("task", "")), _reviewer(request.POST.get("reviewer", ""))
        assignments.claim_reassign(task=task, to_reviewer=reviewer, by=request.user)
        return f"{task.key} is now held by {reviewer.get_username()}."
    if action == "release":
        task = _task(request.POST.get("task", ""))
        assignments.claim_release(task=task, by=request.user)
        return f"{task.key} is free for any reviewer."
    if action == "domains":
        reviewer = _reviewer(request.POST.get("reviewer", ""))
        domains = assignments.reviewer_domain_set(
            reviewer=reviewer, domains=request.POST.get("domains", "").split(","), by=request.user
        )
        return f"{reviewer.get_username()} takes {', '.join(domains) or 'no domain'}."
    raise ServiceError(f"Unknown action {action!r}.")


@policy.page("review_claims")
def review_claims(request):
    """Leads: every live claim with who holds it until when, reassign or release it, assign the queue."""
    if request.method == "POST":
        try:
            messages.success(request, _claims_post(request))
        except ServiceError as error:
            messages.error(request, str(error))
        return redirect("review_claims")
    context = {
        "claims": assignments.claims_active(),
        "reviewers": assignments.reviewers(),
        "strategies": assignments.STRATEGIES,
    }
    return render(request, "review/review_claims.html", context)


@policy.page("second_review_next")
def second_review_next(request):
    """The oldest task waiting for this reviewer's blind second review (or a gold item)."""
    item = double_review.second_reviews_open(reviewer=request.user).first()
    if item is not None:
        return redirect("blind_review", item_id=item.pk)
    return render(request, "review/blind_task_review.html", {"item": None})


def blind_task_review(request, item: BlindItem):
    """A task item of the blind review page (called by web.views.judges.blind_review)."""
    if request.method == "POST":
        return shared.blind_verdict_post(
            request,
            item,
            record=double_review.second_review_record,
            done="Your review is recorded.",
            then="second_review_next",
        )
    context = {
        "item": item,
        "shown": double_review.task_blind_view(item=item),
        "own_review": item.reviews.filter(reviewer=request.user).first(),
        "waiting": double_review.second_reviews_open(reviewer=request.user).count(),
    }
    return render(request, "review/blind_task_review.html", context)


@policy.page("review_agreement")
def review_agreement(request):
    """Agreement between reviewers (per pair and environment) and accuracy on gold items."""
    agreement = double_review.reviewer_agreement()
    context = {
        "pairs": agreement["pairs"],
        "environments": agreement["environments"],
        "gold": double_review.gold_accuracy(),
        "disputed": double_review.adjudication_queue().count(),
    }
    return render(request, "review/review_agreement.html", context)


@policy.page("adjudication_list")
def adjudication_list(request):
    """Leads: double reviews whose reviewers disagree, each with both decisions and notes."""
    return render(request, "review/adjudication.html", {"items": double_review.adjudication_queue()})


@require_POST
@policy.page("adjudication_decide")
def adjudication_decide(request, item_id: int):
    items = BlindItem.objects.select_related("task_version__task__environment")
    item = policy.get_for(request.user, policy.ADJUDICATE, items, pk=item_id)
    try:
        double_review.adjudicate(
            item=item,
            lead=request.user,
            verdict=request.POST.get("verdict", ""),
            comment=request.POST.get("comment", ""),
        )
        messages.success(request, f"{item.task_version.task.key} settled.")
    except ServiceError as error:
        messages.error(request, str(error))
    return redirect("adjudication_list")


@require_POST
@policy.page("gold_add")
def gold_add(request, environment_name: str, key: str):
    task = shared.task_for(request, policy.SEE, environment_name, key)
    try:
        double_review.gold_add(task=task, decision=request.POST.get("decision", ""), by=request.user)
        messages.success(request, f"{task.key} is a gold item: reviewers meet it blind in their second reviews.")
    except ServiceError as error:
        messages.error(request, str(error))
    return shared.back(request, task)


def _fix_content(post) -> dict:
    """The fixed task's content from the fix form: the prompt as chat messages (JSON) or plain text, the
    answer, and the verifier as a JSON object; ServiceError naming the field when it does not parse."""
    content: dict = {"answer": post.get("answer", "")}
    prompt = post.get("prompt", "").strip()
    try:
        content["prompt"] = json.loads(prompt) if prompt.startswith("[") else prompt
    except json.JSONDecodeError as error:
        raise ServiceError(f"prompt: not valid JSON chat messages (line {error.lineno}: {error.msg}).") from None
    try:
        content["verifier"] = json.loads(post.get("verifier", "") or "{}")
    except json.JSONDecodeError as error:
        raise ServiceError(f"verifier: not valid JSON (line {error.lineno}: {error.msg}).") from None
    return content


@require_POST
@policy.page("review_fix")
def review_fix(request, environment_name: str, key: str):
    """A reviewer's fix: a new version of the task, audited again; the queue then offers a re-probe."""
    task = shared.task_for(request, policy.REVIEW, environment_name, key)
    try:
        version = review_services.review_fix(
            task=task,
            reviewer=request.user,
            content=_fix_content(request.POST),
            defect=request.POST.get("defect", ""),
            comment=request.POST.get("comment", ""),
        )
    except ServiceError as error:
        messages.error(request, str(error))
    else:
        audit = {True: "its audit passed", False: "its audit FAILED", None: "not audited"}[version.audit_passed]
        messages.success(
            request, f"{task.key} is now version {version.number} ({audit}); re-probe it before approving."
        )
    return shared.back(request, task)


@require_POST
@policy.page("review_reprobe")
def review_reprobe(request, environment_name: str, key: str):
    """Probe a task's current version (after a fix) with the chosen model: a campaign of one task."""
    task = shared.task_for(request, policy.REVIEW, environment_name, key)
    probe_model = get_object_or_404(ProbeModel, name=request.POST.get("model", ""))
    try:
        campaign = shared.task_probe_start(request, task, probe_model)
    except (ServiceError, ValueError) as error:
        messages.error(request, f"Could not start the re-probe: {error}")
    else:
        messages.success(request, f"Re-probing {task.key} v{task.current_version.number}: campaign {campaign.pk}.")
    return shared.back(request, task)


@policy.page("defect_rates")
def defect_rates(request):
    """Defect rates per author and per environment (authors see their own)."""
    context = {
        "authors": defects.defect_rates(group="author", viewer=request.user),
        "environments": defects.defect_rates(group="environment", viewer=request.user),
        "defects": Review.Defect.choices,
    }
    return render(request, "review/defect_rates.html", context)


@policy.page("notification_list")
def notification_list(request):
    """The signed-in person's notifications (mentions); POST marks them all read."""
    if request.method == "POST":
        changed = notifications.notifications_mark_read(user=request.user)
        messages.success(request, f"{changed} notification(s) marked read.")
        return redirect("notification_list")
    rows = notifications.notifications_for(user=request.user)[:200]
    return render(request, "review/notifications.html", {"notifications": rows})
