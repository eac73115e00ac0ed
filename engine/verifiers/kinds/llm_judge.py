"""``llm_judge``: a model at an OpenAI-compatible endpoint grades the completion against a rubric.

Config::

    {"kind": "llm_judge",
     "base_url": "http://judge:8000/v1",   # required; OpenAI-style base (…/v1): the request goes
                                           #  to {base_url}/chat/completions
     "model": "Qwen/Qwen2.5-72B-Instruct", # required; pinned so verdicts are reproducible
     "rubric": "Pass if the answer ...",   # required
     "api_key_env": "JUDGE_API_KEY",       # optional: name of the environment variable holding
                                           #  the key (the key itself never sits in a task)
     "include_reference": true,            # show the task's reference answer to the judge
     "max_tokens": 1024,
     "timeout_seconds": 60,
     "retries": 1}                         # extra attempts after a transport error or 5xx

The judge is sampled at temperature 0 and must end its reply with a line ``VERDICT: PASS`` or
``VERDICT: FAIL``. A judge that cannot be reached, answers with an HTTP error, or answers without
a readable verdict gives ``error`` (never a fail: the model under test did nothing wrong).
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from typing import Any

import httpx

from engine.verifiers.base import (
    Check,
    ConfigReader,
    VerifierConfigError,
    errored,
    failed,
    passed,
    shorten,
)
from engine.verifiers.text import completion_text, prompt_text

KIND = "llm_judge"

SYSTEM_PROMPT = (
    "You are a strict grader. You receive a task, possibly a reference answer, a response to "
    "grade, and a rubric. Judge the response only by the rubric. Explain briefly, then end "
    "with a final line that is exactly `VERDICT: PASS` or `VERDICT: FAIL`."
)
_VERDICT = re.compile(r"VERDICT\s*[:=]\s*\**\s*(PASS|FAIL)\b", re.IGNORECASE)


@dataclass(frozen=True)
class JudgeConfig:
    base_url: str
    model: str
    rubric: str
    api_key_env: str
    include_reference: bool
    max_tokens: int
    timeout_seconds: float
    retries: int


def parse_config(raw: dict[str, Any]) -> JudgeConfig:
    reader = ConfigReader(raw, kind=KIND)
    base_url = reader.string("base_url", non_empty=True).rstrip("/")
    if not base_url.startswith(("http://", "https://")):
        raise VerifierConfigError("base_url", f"must start with http:// or https://, got {base_url!r}")
    api_key_env = reader.string("api_key_env", "")
    if api_key_env and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", api_key_env):
        raise VerifierConfigError("api_key_env", f"must be an environment variable name, got {api_key_env!r}")
    config = JudgeConfig(
        base_url=base_url,
        model=reader.string("model", non_empty=True),
        rubric=reader.string("rubric", non_empty=True),
        api_key_env=api_key_env,
        include_reference=reader.boolean("include_reference", True),
        max_tokens=reader.integer("max_tokens", 1024, minimum=16, maximum=32768),
        timeout_seconds=reader.number("timeout_seconds", 60.0, minimum=0, maximum=600, exclusive_minimum=True),
        retries=reader.integer("retries", 1, minimum=0, maximum=5),
    )
    reader.finish()
    return config


def judge_messages(config: JudgeConfig, *, completion: str, answer: str | None, prompt: Any) -> list[dict[str, str]]:
    sections = [f"## Task\n{prompt_text(prompt) or '(not given)'}"]
    if config.include_reference and answer is not None:
        sections.append(f"## Reference answer\n{answer}")
    sections.append(f"## Response to grade\n{completion}")
    sections.append(f"## Rubric\n{config.rubric}")
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": "\n\n".join(sections)}]


def check(config: JudgeConfig, *, completion: Any, answer: str | None, prompt: Any = None) -> Check:
    headers = {"Content-Type": "application/json"}
    if config.api_key_env:
        key = os.environ.get(config.api_key_env)
        if not key:
            return errored(f"judge API key variable {config.api_key_env} is not set")
        headers["Authorization"] = f"Bearer {key}"
    body = {
        "model": config.model,
        "messages": judge_messages(config, completion=completion_text(completion), answer=answer, prompt=prompt),
        "temperature": 0,
        "max_tokens": config.max_tokens,
    }
    url = f"{config.base_url}/chat/completions"
    problem = ""
    for attempt in range(config.retries + 1):
        if attempt:
            time.sleep(min(2.0, 0.25 * 2**attempt))
        try:
            response = httpx.post(url, json=body, headers=headers, timeout=config.timeout_seconds)
        except httpx.HTTPError as error:
            problem = f"judge unreachable: {type(error).__name__}: {shorten(str(error), 100)}"
            continue
        if response.status_code >= 500:
            problem = f"judge answered HTTP {response.status_code}"
            continue
        if response.status_code != 200:
            return errored(f"judge answered HTTP {response.status_code}: {shorten(response.text, 100)}")
        return _read_verdict(response)
    return errored(problem)


def _read_verdict(response: httpx.Response) -> Check:
    try:
        content = response.json()["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        return errored(f"judge reply is not a chat completion: {shorten(response.text, 100)}")
    if not isinstance(content, str):
        return errored("judge reply has no text content")
    verdicts = _VERDICT.findall(content)
    if not verdicts:
        return errored(f"judge reply has no VERDICT line: {shorten(content, 100)!r}")
    reason = shorten(_VERDICT.sub("", content).strip(), 120)
    if verdicts[-1].upper() == "PASS":
        return passed(f"judge: {reason}" if reason else "judge: pass")
    return failed(f"judge: {reason}" if reason else "judge: fail")
