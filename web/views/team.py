"""Pages of the team's review workbench: who holds what (leads), second blind reviews, agreement
between reviewers, the adjudication queue and gold items. docs/review.md."""

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from accounts.errors import ServiceError
from curation import assignments, double_review, policy
from curation.models import BlindItem, Task
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
    return render(request, "curation/review_claims.html", context)


@policy.page("second_review_next")
def second_review_next(request):
    """The oldest task waiting for this reviewer's blind second review (or a gold item)."""
    item = double_review.second_reviews_open(reviewer=request.user).first()
    if item is not None:
        return redirect("blind_review", item_id=item.pk)
    return render(request, "curation/blind_task_review.html", {"item": None})


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
    return render(request, "curation/blind_task_review.html", context)


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
    return render(request, "curation/review_agreement.html", context)


@policy.page("adjudication_list")
def adjudication_list(request):
    """Leads: double reviews whose reviewers disagree, each with both decisions and notes."""
    return render(request, "curation/adjudication.html", {"items": double_review.adjudication_queue()})


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
