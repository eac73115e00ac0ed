"""Training traces of a campaign: its rollouts read in chunks and turned into trace rows (engine.traces)
or ATIF trajectories, written to a JSONL or Parquet file. Reads only; the page, the API and
`manage.py export_traces` call `campaign_traces_write`.

Which rollouts: those of the campaign's tasks the user may see (curation.policy.tasks_visible_to);
by default only trainable ones (token ids captured, a reward given); `include_excluded` keeps the
others, marked with `trainable: false` and the reason.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import F
from django.http import FileResponse, Http404

from calibration.models import Campaign, Rollout
from curation.policy import tasks_visible_to
from engine import traces
from engine.packing import unpack_logprobs, unpack_tokens
from releases.services import probe_model_identity

CHUNK_SIZE = 500  # rollouts carry their token arrays and transcripts: a few MB a chunk
TRACE_FIELDS = {
    "rollout_id": F("pk"),
    "task_key": F("task_version__task__key"),
    "environment": F("task_version__task__environment__name"),
    "version_hash": F("task_version__content_hash"),
    "task_prompt": F("task_version__prompt"),
}
ROLLOUT_COLUMNS = (
    "campaign_id",
    "sample_index",
    "seed",
    "prompt_token_ids",
    "completion_token_ids",
    "logprobs",
    "episode",
    "capture",
    "logprob_source",
    "prompt_ids_source",
    "sampling",
    "text",
    "finish_reason",
    "truncated",
    "outcome",
    "reward",
    "detail",
    "pruned_at",
)


def campaign_trace_records(*, campaign: Campaign, user: AbstractBaseUser | None) -> Iterator[dict]:
    """The campaign's rollouts as engine.traces records, in (task version, sample) order; only the tasks
    `user` may see (every task when `user` is None: the management command)."""
    rollouts = Rollout.objects.filter(campaign=campaign)
    if user is not None:
        rollouts = rollouts.filter(task_version__task__in=tasks_visible_to(user).values("pk"))
    policy = probe_model_identity(probe_model=campaign.probe_model)
    rows = rollouts.order_by("task_version_id", "sample_index").values(*ROLLOUT_COLUMNS, **TRACE_FIELDS)
    for row in rows.iterator(chunk_size=CHUNK_SIZE):
        yield {
            **row,
            "campaign": row.pop("campaign_id"),
            "prompt_token_ids": unpack_tokens(row["prompt_token_ids"]),
            "completion_token_ids": unpack_tokens(row["completion_token_ids"]),
            "logprobs": unpack_logprobs(row["logprobs"]),
            "pruned": row.pop("pruned_at") is not None,
            "policy": policy,
        }


def campaign_trace_rows(
    *, campaign: Campaign, user: AbstractBaseUser | None, file_type: str, include_excluded: bool = False
) -> Iterator[dict]:
    """Trace rows (file type jsonl or parquet) or ATIF trajectories (atif) of the campaign."""
    for record in campaign_trace_records(campaign=campaign, user=user):
        trace = traces.trace_of(record)
        if not trace["trainable"] and not include_excluded:
            continue
        if file_type == "atif":
            episode = record["episode"]
            messages = episode["messages"] if episode else _messages(record["task_prompt"])
            yield traces.atif_trajectory(trace, messages=messages, episode=episode)
        else:
            yield trace


def campaign_traces_write(
    *, campaign: Campaign, user: AbstractBaseUser | None, file_type: str, path: Path, include_excluded: bool = False
) -> int:
    """Write the campaign's traces to `path` as `file_type` (jsonl, parquet or atif); returns the count."""
    rows = campaign_trace_rows(campaign=campaign, user=user, file_type=file_type, include_excluded=include_excluded)
    return traces.write_traces(rows=rows, file_type=file_type, path=path)


def campaign_traces_open(
    *, campaign: Campaign, user: AbstractBaseUser | None, file_type: str, include_excluded: bool = False
) -> BinaryIO:
    """The campaign's traces written to a temporary file, open for reading (for a download); the file
    has no name on disk any more, so it goes away when the response closes it."""
    folder = Path(tempfile.mkdtemp(prefix="passband-traces-"))
    try:
        path = folder / f"traces.{file_type}"
        campaign_traces_write(
            campaign=campaign, user=user, file_type=file_type, path=path, include_excluded=include_excluded
        )
        stream = open(path, "rb")  # closed by the response
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return stream


TRACE_CONTENT_TYPES = {
    "jsonl": "application/x-ndjson",
    "atif": "application/x-ndjson",
    "parquet": "application/vnd.apache.parquet",
}


def campaign_traces_response(
    *, campaign: Campaign, user: AbstractBaseUser, file_type: str, include_excluded: bool
) -> FileResponse:
    """The download of the page and the API: the campaign's traces as an attachment. Http404 for an
    unknown file type. The caller has checked that `user` may export the campaign (curation.policy)."""
    if file_type not in traces.TRACE_FILE_TYPES:
        raise Http404(f"No traces as {file_type}; file types: {', '.join(traces.TRACE_FILE_TYPES)}.")
    stream = campaign_traces_open(campaign=campaign, user=user, file_type=file_type, include_excluded=include_excluded)
    # ATIF trajectories are JSON lines too, one trajectory a line.
    suffix = "atif.jsonl" if file_type == "atif" else file_type
    return FileResponse(
        stream,
        as_attachment=True,
        filename=f"campaign-{campaign.pk}-traces.{suffix}",
        content_type=TRACE_CONTENT_TYPES[file_type],
    )


def _messages(prompt) -> list[dict]:
    return [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt or [])
