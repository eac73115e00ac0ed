"""``reasoning_gym``: a reasoning-gym generator's own ``score_answer`` judges the answer.

Config::

    {"kind": "reasoning_gym",
     "dataset": "basic_arithmetic",  # the generator (reasoning_gym.factory.DATASETS)
     "metadata": {...},              # the generated entry's metadata, as the generator wrote it
     "extract": "answer_tag",        # "answer_tag" (last <answer>...</answer>, reasoning-gym's
                                     #  convention) | "last_line" | "whole"
     "timeout_seconds": 5}           # per score

The entry the scorer sees is ``{"question": <the prompt's last user message>, "answer": <the task's
answer>, "metadata": ...}``: the same on every path (probe, API, trainer), since all three travel
with the task. Tasks of this kind are written by ``manage.py import_reasoning_gym`` (see
engine/integrations/reasoning_gym_tasks.py).

Many generators give partial credit (a long answer that contains the right one, an answer close in
edit distance): the rollout passes only at score 1.0, and the score is kept in the detail. Every
score runs in a helper process (reasoning_gym_worker.py) under a memory cap and a deadline.
"""

from __future__ import annotations

import functools
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
    shorten,
    timed_out,
)
from engine.verifiers.kind import KindExample, KindExports, OutsideSource, VerifierKind
from engine.verifiers.text import (
    answer_tag_contents,
    completion_text,
    is_chat_messages,
    last_nonempty_line,
    message_text,
)

KIND = "reasoning_gym"
EXTRACT_MODES = ("answer_tag", "last_line", "whole")
WORKER_SCRIPT = Path(__file__).resolve().parent.parent / "reasoning_gym_worker.py"
WORKER_MEMORY_BYTES = 2 << 30
HARD_LIMIT_GRACE_SECONDS = 1.0
FULL_SCORE = 1.0


@dataclass(frozen=True)
class ReasoningGymConfig:
    dataset: str
    metadata: dict[str, Any]
    extract: str
    timeout_seconds: float


@functools.lru_cache(maxsize=1)
def generator_names() -> frozenset[str]:
    """The generators the installed reasoning-gym registers (imported once: about two seconds)."""
    try:
        from reasoning_gym.factory import DATASETS
    except ImportError as error:  # pragma: no cover - a dependency of Passband
        raise VerifierConfigError("dataset", f"reasoning-gym is not installed ({error})") from error
    return frozenset(DATASETS)


def parse_config(raw: dict[str, Any]) -> ReasoningGymConfig:
    reader = ConfigReader(raw, kind=KIND)
    config = ReasoningGymConfig(
        dataset=reader.string("dataset"),
        metadata=reader.mapping("metadata", {}),
        extract=reader.string("extract", "answer_tag", choices=EXTRACT_MODES),
        timeout_seconds=reader.number("timeout_seconds", 5.0, minimum=0, maximum=120, exclusive_minimum=True),
    )
    reader.finish()
    if config.dataset not in generator_names():
        raise VerifierConfigError(
            "dataset", f"unknown reasoning-gym generator {config.dataset!r} (see reasoning_gym.factory.DATASETS)"
        )
    return config


_helpers = HelperScript(WORKER_SCRIPT, memory_bytes=WORKER_MEMORY_BYTES)


def worker_pool() -> WorkerPool:
    """The process-wide pool of scoring helpers (at most one per CPU, started on demand)."""
    return _helpers.pool()


def question_text(prompt: Any) -> str:
    """The generator's question: the prompt's last user message (the whole prompt when it is text)."""
    if isinstance(prompt, str):
        return prompt
    if is_chat_messages(prompt):
        users = [message for message in prompt if message.get("role") == "user"]
        return message_text(users[-1]) if users else ""
    return ""


def extract_answer(text: str, mode: str) -> str | None:
    if mode == "whole":
        return text.strip()
    if mode == "last_line":
        line = last_nonempty_line(text).strip()
        return line or None
    found = answer_tag_contents(text)
    return found[-1].strip() if found else None


def check(config: ReasoningGymConfig, *, completion: Any, answer: str | None, prompt: Any = None) -> Check:
    if answer is None:
        raise VerifierConfigError("answer", "the reasoning_gym verifier needs the task's reference answer")
    extracted = extract_answer(completion_text(completion), config.extract)
    if not extracted:
        return failed("no <answer>...</answer> found" if config.extract == "answer_tag" else "empty answer")
    request = {
        "dataset": config.dataset,
        "answer": extracted,
        "entry": {"question": question_text(prompt), "answer": answer, "metadata": config.metadata},
        "timeout_seconds": config.timeout_seconds,
    }
    try:
        response = worker_pool().call(request, timeout=config.timeout_seconds + HARD_LIMIT_GRACE_SECONDS)
    except WorkerTimeout:
        return timed_out(f"scoring exceeded {config.timeout_seconds:g}s; helper process killed")
    except WorkerFailed as error:
        return errored(f"reasoning-gym helper process failed: {error}")
    if response.get("outcome") != "scored":
        outcome = "timeout" if response.get("outcome") == "timeout" else "error"
        return Check(outcome, str(response.get("detail", "")))
    score = float(response["score"])
    said = f"answer {shorten(extracted, 80)!r} scored {score:.3g} by {config.dataset}"
    if response.get("detail"):
        said += f" ({response['detail']})"
    if score >= FULL_SCORE:
        return passed(said)
    return failed(f"{said}; partial credit does not pass, only {FULL_SCORE:g}" if score > 0 else said)


def reference_completion(config: ReasoningGymConfig, answer: str) -> str:
    """The reference answer in the format the prompt asks for, for the task audit."""
    return f"<answer>{answer}</answer>" if config.extract == "answer_tag" else answer


VERIFIER_KIND = VerifierKind(
    name=KIND,
    parse_config=parse_config,
    check=check,
    reference_completion=reference_completion,
    gameability="answer_tag",
    outside_source=OutsideSource(field="dataset", package="reasoning-gym"),
    exports=KindExports(),
    examples=(
        KindExample(
            {"kind": KIND, "dataset": "basic_arithmetic", "metadata": {}},
            passing="<answer>12</answer>",
            failing="<answer>13</answer>",
            answer="12",
            prompt="Calculate 5 + 7. Put the answer in <answer> tags.",
        ),
    ),
)
