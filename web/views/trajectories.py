"""The trajectory viewer: every rollout of the tasks a user may see, token by token."""

import math

from django.shortcuts import get_object_or_404, render
from django.utils.html import escape
from django.utils.safestring import mark_safe

from calibration import selectors as calibration_selectors
from calibration.models import Campaign, ProbeModel
from calibration.selectors import rollouts_for_viewer
from curation import policy
from curation.models import Environment
from engine.backends.tokenizers import token_pieces
from engine.episodes import world as episode_world
from engine.packing import unpack_logprobs, unpack_tokens
from engine.repo_tasks.patches import extract_patch
from web.views import shared

TOKENS_SHOWN = 2048
MAX_PATCH_LINES = 2000


def _token_rows(rollout) -> list[dict]:
    """Completion tokens with their text and logprobs, for shading: low probability is darker.

    The text of each token comes from the probe model's tokenizer when this machine has it; else
    the row carries only the id."""
    ids = unpack_tokens(rollout.completion_token_ids) or []
    logprobs = unpack_logprobs(rollout.logprobs) or []
    pieces = None
    if ids:
        probe_model = rollout.probe_model
        pieces = token_pieces(kind=probe_model.backend, model=probe_model.model, ids=ids[:TOKENS_SHOWN])
    rows = []
    for index, token_id in enumerate(ids[:TOKENS_SHOWN]):
        logprob = logprobs[index] if index < len(logprobs) else None
        probability = math.exp(logprob) if logprob is not None else None
        rows.append(
            {
                "id": token_id,
                "text": pieces[index] if pieces is not None else None,
                "logprob": logprob,
                "probability": probability,
                # 0 (certain) .. 100 (very unlikely), as a percentage for the inline shade.
                "shade": round(100 * (1 - probability)) if probability is not None else 0,
                "dark": probability is not None and probability < 0.4,
            }
        )
    return rows


def _token_strip(rows: list[dict]) -> str:
    """The token strip's HTML, built here: a template loop over thousands of spans took most of the page's time."""
    spans = []
    for row in rows:
        text = str(row["id"]) if row["text"] is None else (row["text"] or "∅")
        logprob = "" if row["logprob"] is None else f"{row['logprob']:.3f}"
        probability = "" if row["probability"] is None else f"{row['probability']:.3f}"
        spans.append(
            f'<span class="token{" dark" if row["dark"] else ""}" style="--shade: {row["shade"]}%" '
            f'title="id {row["id"]} · logprob {logprob} · p {probability}">{escape(text)}</span>'
        )
    return mark_safe("".join(spans))  # every piece of text above is escaped


def _patch_lines(rollout) -> list[dict] | None:
    """A repository rollout's patch, line by line with its kind (add, del, hunk, file, context): an episode's
    edits (its final state's patch), or the diff in a single-turn answer. None when there is none."""
    final_state = (rollout.episode or {}).get("final_state")
    if isinstance(final_state, dict) and isinstance(final_state.get("patch"), str):
        patch = final_state["patch"]
    else:
        patch = extract_patch(rollout.text or "")
    if not patch.strip():
        return None
    lines = []
    for line in patch.splitlines()[:MAX_PATCH_LINES]:
        if line.startswith(("diff --git", "--- ", "+++ ")):
            kind = "file"
        elif line.startswith("@@"):
            kind = "hunk"
        else:
            kind = {"+": "add", "-": "del"}.get(line[:1], "context")
        lines.append({"kind": kind, "text": line})
    return lines


def _episode_state_changes(episode: dict | None) -> list[dict] | None:
    """What an episode changed in its world: the final state against a fresh reset of the same seed."""
    if not episode or episode.get("final_state") is None:
        return None
    try:
        before = episode_world.initial_state(environment=episode["environment"], seed=episode["seed"])
    except (KeyError, ValueError, RuntimeError):
        return None  # an environment this server does not know, or one whose sandbox failed: the final state only
    return episode_world.state_diff(before=before, after=episode["final_state"])


@policy.page("trajectory_list")
def trajectory_list(request):
    tasks = policy.tasks_visible_to(request.user)
    environment = None
    if request.GET.get("environment"):
        environment = get_object_or_404(Environment, name=request.GET["environment"])
        tasks = tasks.filter(environment=environment)
    if request.GET.get("task"):
        tasks = tasks.filter(key=request.GET["task"])
    probe_model = ProbeModel.objects.filter(name=request.GET.get("model", "")).first()
    outcome = request.GET.get("outcome", "")
    search = request.GET.get("q", "").strip()
    versions = tasks.exclude(current_version=None).values("current_version")
    campaign = None
    if request.GET.get("campaign", "").isdigit():
        campaign = policy.get_for(request.user, policy.SEE, Campaign.objects.all(), pk=int(request.GET["campaign"]))
    scope = {"task_versions": versions, "search": search, "probe_model": probe_model, "campaign": campaign}
    rollouts = rollouts_for_viewer(outcome=outcome, **scope)
    unfiltered = rollouts_for_viewer(**scope)
    outcome_counts = calibration_selectors.outcome_counts(rollouts=unfiltered)
    shown, page, has_next = shared.page_of(request, rollouts, size=25)
    for rollout in shown:
        rollout.state_changes = _episode_state_changes(rollout.episode)
        rollout.patch_lines = _patch_lines(rollout)
        rollout.tokens = _token_strip(_token_rows(rollout))
        rollout.token_count = len(unpack_tokens(rollout.completion_token_ids) or [])
        rollout.prompt_token_count = len(unpack_tokens(rollout.prompt_token_ids) or [])
    return render(
        request,
        "curation/trajectory_list.html",
        {
            "rollouts": shown,
            "outcome_counts": outcome_counts,
            "outcome": outcome,
            "search": search,
            "environment": environment,
            "environments": Environment.objects.all(),
            "probe_model": probe_model,
            "campaign": campaign,
            "rollouts_total": sum(row["count"] for row in outcome_counts),
            "probe_models": ProbeModel.objects.all(),
            "task_key": request.GET.get("task", ""),
            "page": page,
            "has_next": has_next,
            "query": shared.query_without(request, "page"),
            "outcome_query": shared.query_without(request, "page", "outcome"),
            "tokens_shown": TOKENS_SHOWN,
        },
    )
