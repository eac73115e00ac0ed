"""Judges checked against people: the blind review of judged rollouts, and each judge's agreement page."""

from django.conf import settings
from django.contrib import messages
from django.http import Http404
from django.shortcuts import redirect, render

from curation import judge_master_keys, policy
from curation.errors import CurationError
from engine.verifiers.judges import get_judge, judge_names
from review import blind_reviews, double_review
from review.models import BlindItem, BlindReview
from web.views import shared, team


@policy.page("blind_review_next")
def blind_review_next(request):
    """The oldest judged rollout waiting for this reviewer's verdict, or a page saying there is none."""
    item = blind_reviews.blind_items_open(reviewer=request.user).first()
    if item is not None:
        return redirect("blind_review", item_id=item.pk)
    return render(request, "review/blind_review.html", {"item": None})


@policy.page("blind_review")
def blind_review(request, item_id: int):
    """One blind item: what the judge was asked and the response, never the judge's verdict; POST a verdict.
    A task item (a second review, a gold item) has its own page (web.views.team)."""
    items = BlindItem.objects.select_related("task_version__task__environment")
    item = policy.get_for(request.user, policy.REVIEW, items, pk=item_id)
    if item.kind in double_review.TASK_KINDS:
        return team.blind_task_review(request, item)
    if request.method == "POST":
        return shared.blind_verdict_post(
            request, item, record=blind_reviews.blind_review_record, done="Verdict recorded.", then="blind_review_next"
        )
    context = {
        "item": item,
        "shown": blind_reviews.blind_item_view(item=item),
        "own_review": blind_reviews.blind_review_of(item=item, reviewer=request.user),
        "waiting": blind_reviews.blind_items_open(reviewer=request.user).count(),
        "verdicts": BlindReview.Verdict.values,
    }
    return render(request, "review/blind_review.html", context)


def _limit() -> float:
    return settings.PASSBAND_JUDGE_FALSE_PASS_LIMIT


@policy.page("judge_list")
def judge_list(request):
    """Every judge, registered or with reviewed samples: its agreement over all its prompt versions."""
    rows = [row for row in blind_reviews.decider_agreement(limit=_limit()) if row.decided_version == ""]
    measured = {row.decided_by for row in rows}
    context = {"rows": rows, "unmeasured": [name for name in judge_names() if name not in measured], "limit": _limit()}
    return render(request, "curation/judge_list.html", context)


@policy.page("judge_detail")
def judge_detail(request, judge: str):
    """One judge: agreement per prompt version and pooled, with the false-pass warning."""
    rows = blind_reviews.decider_agreement(decided_by=judge, limit=_limit())
    registered = get_judge(judge)
    master_keys = judge_master_keys.judge_latest_run(judge=judge)
    if not rows and registered is None and master_keys is None:
        raise Http404(f"No judge {judge!r} is registered or has sampled rollouts.")
    context = {
        "judge": judge,
        "master_keys": master_keys,
        "scoring_block": judge_master_keys.judge_scoring_block(judge=judge),
        "model": registered.model if registered else "",
        "rows": rows,
        "examples": blind_reviews.decided_version_examples(decided_by=judge),
        "limit": _limit(),
    }
    return render(request, "curation/judge_detail.html", context)


@policy.page("judge_master_keys_start")
def judge_master_keys_start(request, judge: str):
    """Queue the master-key battery on the judge's tasks (staff)."""
    try:
        judge_master_keys.judge_master_keys_request(judge=judge, user=request.user)
    except CurationError as error:
        messages.error(request, str(error))
    else:
        messages.success(request, "The master-key battery is queued: this page shows its result once a worker ran it.")
    return redirect("judge_detail", judge=judge)


@policy.page("judge_scoring_override")
def judge_scoring_override(request, judge: str):
    """Let a judge whose bound is above the limit score campaigns, with the posted reason (staff, audited)."""
    try:
        judge_master_keys.judge_scoring_override(judge=judge, staff=request.user, reason=request.POST.get("reason", ""))
    except CurationError as error:
        messages.error(request, str(error))
    else:
        messages.success(request, f"Judge {judge} may score campaigns despite its master-key bound.")
    return redirect("judge_detail", judge=judge)
