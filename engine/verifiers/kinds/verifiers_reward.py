"""``verifiers_reward``: a verifiers 0.4 taskset's own ``@vf.reward`` methods score the rollout.

Config::

    {"kind": "verifiers_reward",
     "taskset": "vf-word-arithmetic",  # the verifiers taskset id (an installed package)
     "args": {...},                    # the taskset's config fields (what --env.taskset.* sets in vf-eval)
     "data": {...},                    # the task's wire data (its TaskData), as the taskset loaded it
     "reference_format": "\\boxed{{answer}}",  # the reference answer as a reply, for the audit:
                                       #  "{answer}" is replaced by the task's answer (default "{answer}")
     "timeout_seconds": 10}            # per score

verifiers scores a finished trace: each reward returns a score and carries a weight, and the trace's
reward is the weighted sum. Here the trace is the task's prompt and the completion (its assistant turns
sampled), scored with no runtime and no judge: a taskset whose rewards need either is refused at import.
A rollout passes only at full reward: every reward of positive weight scores 1.0 (and any of negative
weight, a penalty, scores 0). The weighted sum and each reward's score are kept in the detail, so a
partial score (a right format with a wrong answer) is seen but not paid. A reward that raises is an
``error``, one that runs past the deadline a ``timeout``: never a fail.

The rewards are the taskset author's code: every score runs in a helper process (verifiers_worker.py)
under a memory cap, a deadline and a lockdown, never in the web or worker process. Tasks of this kind
are written by ``manage.py import_verifiers`` (engine/integrations/verifiers_tasks.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.sandbox.worker_pool import HelperScript, WorkerFailed, WorkerPool, WorkerTimeout
from engine.verifiers.base import (
    Check,
    ConfigReader,
    VerifierConfigError,
    errored,
    failed,
    passed,
    timed_out,
)
from engine.verifiers.kind import KindExports, OutsideSource, VerifierKind
from engine.verifiers.text import is_chat_messages

KIND = "verifiers_reward"
WORKER_SCRIPT = Path(__file__).resolve().parent.parent / "verifiers_worker.py"
WORKER_MEMORY_BYTES = 3 << 30  # verifiers and its dependencies take about 200 MB before any taskset
HARD_LIMIT_GRACE_SECONDS = 2.0
ANSWER_PLACEHOLDER = "{answer}"
COMPLETION_ROLES = ("assistant", "tool")


@dataclass(frozen=True)
class VerifiersRewardConfig:
    taskset: str
    args: dict[str, Any]
    data: dict[str, Any]
    reference_format: str
    timeout_seconds: float


def parse_config(raw: dict[str, Any]) -> VerifiersRewardConfig:
    reader = ConfigReader(raw, kind=KIND)
    config = VerifiersRewardConfig(
        taskset=reader.string("taskset"),
        args=reader.mapping("args", {}),
        data=reader.mapping("data", {}),
        reference_format=reader.string("reference_format", ANSWER_PLACEHOLDER),
        timeout_seconds=reader.number("timeout_seconds", 10.0, minimum=0, maximum=300, exclusive_minimum=True),
    )
    reader.finish()
    if not config.taskset.strip():
        raise VerifierConfigError("taskset", "names no taskset")
    if ANSWER_PLACEHOLDER not in config.reference_format:
        raise VerifierConfigError("reference_format", f"must hold {ANSWER_PLACEHOLDER}, where the answer goes")
    return config


_helpers = HelperScript(WORKER_SCRIPT, memory_bytes=WORKER_MEMORY_BYTES)


def worker_pool() -> WorkerPool:
    """The process-wide pool of taskset helpers (at most one per CPU, started on demand)."""
    return _helpers.pool()


def helper_call(request: dict[str, Any], *, timeout_seconds: float) -> dict[str, Any]:
    """One request to a taskset helper (see verifiers_worker.py); a missed deadline or a dead helper is
    answered as the helper would have: ``{"outcome": "timeout" | "error", "detail"}``."""
    try:
        return worker_pool().call(
            {**request, "timeout_seconds": timeout_seconds}, timeout=timeout_seconds + HARD_LIMIT_GRACE_SECONDS
        )
    except WorkerTimeout:
        return {"outcome": "timeout", "detail": f"the taskset took over {timeout_seconds:g}s; helper process killed"}
    except WorkerFailed as error:
        return {"outcome": "error", "detail": f"verifiers helper process failed: {error}"}


def chat_messages(value: Any, *, role: str) -> list[dict[str, Any]] | None:
    """Text as one message of `role`, a message as a list of one, messages as they are; None otherwise."""
    if value is None or value == []:
        return []
    if isinstance(value, str):
        return [{"role": role, "content": value}]
    if isinstance(value, dict) and isinstance(value.get("role"), str):
        return [value]
    if is_chat_messages(value):
        return list(value)
    return None


def check(config: VerifiersRewardConfig, *, completion: Any, answer: str | None, prompt: Any = None) -> Check:
    messages = chat_messages(completion, role="assistant")
    if messages is None:
        return failed("the completion is neither text nor chat messages")
    strangers = sorted({str(message.get("role")) for message in messages} - set(COMPLETION_ROLES))
    if strangers:
        return failed(f"the completion holds {strangers[0]} messages; a reply holds only assistant and tool turns")
    request = {
        "op": "score",
        "taskset": config.taskset,
        "args": config.args,
        "data": config.data,
        "prompt": chat_messages(prompt, role="user") or [],
        "completion": messages,
    }
    response = helper_call(request, timeout_seconds=config.timeout_seconds)
    outcome = response.get("outcome")
    if outcome == "unreadable":
        return failed(str(response.get("detail", "")))
    if outcome != "scored":
        detail = str(response.get("detail", ""))
        return timed_out(detail) if outcome == "timeout" else errored(f"{config.taskset}: {detail}")
    return verdict(response.get("rewards") or {}, total=response.get("total"))


def verdict(rewards: dict[str, Any], *, total: Any) -> Check:
    """Pass only at full reward: each reward of positive weight at 1.0, each of negative weight at 0."""
    scored: list[tuple[str, float, float]] = []
    for name, reward in sorted(rewards.items()):
        if not isinstance(reward, dict):
            return errored(f"reward {name!r} did not run")
        score, weight = reward.get("score"), reward.get("weight")
        if not isinstance(score, (int, float)) or not isinstance(weight, (int, float)):
            return errored(f"reward {name!r} gave score {score!r} at weight {weight!r}")
        if not (math.isfinite(score) and math.isfinite(weight)):
            return errored(f"reward {name!r} gave score {score!r} at weight {weight!r}")
        scored.append((name, float(score), float(weight)))
    full = sum(weight for _, _, weight in scored if weight > 0)
    if full <= 0:
        return errored("the task has no reward of positive weight: nothing could pass")
    parts = ", ".join(f"{name} {score:.3g}×{weight:g}" for name, score, weight in scored)
    said = f"reward {float(total) if isinstance(total, (int, float)) else math.nan:.3g} of {full:.3g} ({parts})"
    short = [name for name, score, weight in scored if (weight > 0 and score < 1.0) or (weight < 0 and score > 0)]
    if not short:
        return passed(said)
    return failed(f"{said}; {', '.join(short)} short of full: only the full reward passes")


def reference_completion(config: VerifiersRewardConfig, answer: str) -> str:
    """The reference answer written as the taskset expects a reply, for the task audit."""
    return config.reference_format.replace(ANSWER_PLACEHOLDER, answer)


VERIFIER_KIND = VerifierKind(
    name=KIND,
    parse_config=parse_config,
    check=check,
    reference_completion=reference_completion,
    gameability="text_in_reference_format",
    outside_source=OutsideSource(field="taskset"),
    exports=KindExports(),
    examples_unavailable="scores with an installed verifiers taskset's rubric (tests/plugins/vf-word-arithmetic)",
)
