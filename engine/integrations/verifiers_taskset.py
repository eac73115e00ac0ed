"""A Passband release as a verifiers v1 taskset, scored by Passband's own verifiers.

verifiers 0.4 dropped the dataset API (question/answer/info rows) for `verifiers.v1`: a Taskset's
`load()` yields typed Tasks built from TaskData, and a Task scores a finished trace with `@vf.reward`
methods. PassbandTaskset reads a release file (any export format, JSONL or Parquet), yields one task
per row whose id is `<task key>@<version hash>`, and scores the model's reply with the task's verifier:
the same code and the same verdicts as calibration.

verifiers finds tasksets and harnesses by package name, so the top-level `passband_release` package
re-exports these classes; from a Passband checkout with the `trainers` extra installed:

    PYTHONPATH=. vf-eval passband-release --env.taskset.release release-1-verifiers.parquet \\
        -m Qwen/Qwen2.5-7B-Instruct --client.base-url http://gpu-1:8000/v1 --client.api-key-var VLLM_API_KEY \\
        --no-push

The taskset's default harness is PassbandChatHarness: one chat completion per rollout (the task's
prompt and tools), sent in process through verifiers' interception endpoint, so the model call is
recorded in the trace like any other harness's. verifiers' own `null` harness does the same from a
separate uv-managed program (`--env.agent.harness.id null`), which needs uv and network access to
install that program's dependencies.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import verifiers.v1 as vf
from openai import AsyncOpenAI
from pydantic import Field
from verifiers.v1.dialects.chat import message_to_wire
from verifiers.v1.runtimes import ProgramResult

from engine.integrations.release import ReleaseTask, read_release, score

__all__ = [
    "PassbandChatHarness",
    "PassbandChatHarnessConfig",
    "PassbandData",
    "PassbandEnv",
    "PassbandEnvConfig",
    "PassbandTask",
    "PassbandTaskset",
    "PassbandTasksetConfig",
    "VerifierUndecided",
]


class VerifierUndecided(vf.TaskError):
    """The task's verifier returned `error` or `timeout`: no reward, so the rollout is recorded as errored
    (never as a 0, which would call a broken verifier a wrong answer)."""


class PassbandTasksetConfig(vf.TasksetConfig):
    # Optional only because vf-eval builds a default config before it reads the flags; load() requires it.
    release: Path | None = None
    """A release file: any Passband export (`verifiers`, `native`, `trl` or `nemo_gym`), .jsonl or .parquet."""


class PassbandData(vf.TaskData):
    task_key: str
    version_hash: str
    answer: str | None = None
    verifier: dict[str, Any]
    tools: list[dict[str, Any]] = Field(default_factory=list)
    """Chat Completions tool schemas offered to the model."""
    calibration: dict[str, Any] | None = None
    """The release's calibration of this version: probe model, attempts, pass rate, band."""
    quality_card: dict[str, Any] | None = None
    """The version's quality card (engine/quality_card.py, docs/quality-card.md)."""


def completion_messages(trace: vf.Trace) -> list[dict[str, Any]]:
    """The model's messages in the trace's last branch (assistant turns and any tool results after the
    first), in the OpenAI wire shape Passband's verifiers read."""
    if not trace.branches:
        return []
    messages: list[dict[str, Any]] = []
    for node in trace.branches[-1].nodes:
        if node.sampled or messages:
            messages.append(message_to_wire(node.message))
    return messages


class PassbandTask(vf.Task[PassbandData]):
    @property
    def key(self) -> str:
        """The task version's durable id, not a hash of the wire data (which carries the run-local idx)."""
        return self.data.id or super().key

    def release_task(self) -> ReleaseTask:
        data = self.data
        prompt = [message_to_wire(message) for message in data.prompt or []]
        return ReleaseTask(
            task_key=data.task_key,
            version_hash=data.version_hash,
            prompt=prompt,
            answer=data.answer,
            verifier=data.verifier,
            tools=data.tools,
        )

    @vf.reward(weight=1.0)
    async def passband(self, trace: vf.Trace) -> float:
        """1.0 when the task's verifier passes the model's reply, 0.0 when it fails; raises
        VerifierUndecided on an error or a timeout. The verdict is kept in `trace.info["passband"]`."""
        completion = completion_messages(trace)
        # Verifiers may block (code runs in a sandboxed process): keep the event loop free.
        verdict = await asyncio.to_thread(score, self.release_task(), completion=completion)
        trace.info["passband"] = verdict.to_dict()
        if verdict.reward is None:
            raise VerifierUndecided(f"verifier {verdict.outcome} on {self.data.id}: {verdict.detail}")
        return verdict.reward


def task_data(task: ReleaseTask) -> PassbandData:
    return PassbandData(
        id=task.id,
        name=task.task_key,
        prompt=task.prompt,
        task_key=task.task_key,
        version_hash=task.version_hash,
        answer=task.answer,
        verifier=task.verifier,
        tools=task.tools,
        calibration=task.calibration,
        quality_card=task.quality_card,
    )


class PassbandTaskset(vf.Taskset[PassbandTask, PassbandTasksetConfig]):
    def load(self) -> Iterator[PassbandTask]:
        if self.config.release is None:
            raise ValueError("set the release file: --env.taskset.release PATH (.jsonl or .parquet)")
        for task in read_release(self.config.release):
            yield PassbandTask(task_data(task), self.config.task)


class PassbandEnvConfig(vf.SingleAgentEnvConfig):
    """The single-agent env, with the agent on the local machine: the default harness runs in process,
    so it needs no sandbox (verifiers' default runtime is a remote Prime sandbox)."""

    agent: vf.AgentConfig = vf.AgentConfig(runtime=vf.SubprocessConfig())


class PassbandEnv(vf.Env[PassbandEnvConfig]):
    """One agent seat playing each task once per rollout, as verifiers' SingleAgentEnv does."""

    async def run(self, task: vf.Task, agents: vf.Agents) -> None:
        await agents.agent.run(task)


class PassbandChatHarnessConfig(vf.HarnessConfig):
    max_tokens: int | None = None
    """Completion token cap sent with the request; None leaves it to the sampling config and the server."""


class PassbandChatHarness(vf.Harness[PassbandChatHarnessConfig]):
    """One chat completion per rollout, in process, through the rollout's interception endpoint.

    Passband tasks are single-turn: the prompt (and the tools of a tool task) in, one assistant message
    out. The request goes to verifiers' interception server, which forwards it to the eval's model
    endpoint with the run's model and sampling settings and records the turn in the trace."""

    APPENDS_SYSTEM_PROMPT = True
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(self, ctx, trace, runtime, endpoint, secret, mcp_urls, data, tool_interception_url=None):
        system_prompt, prompt = self.resolve_prompt(data)
        messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
        if isinstance(prompt, str):
            messages.append({"role": "user", "content": prompt})
        else:
            messages.extend(message_to_wire(message) for message in prompt or [])
        request: dict[str, Any] = {"model": ctx.model, "messages": messages}
        if getattr(data, "tools", None):
            request["tools"] = data.tools
        if self.config.max_tokens is not None:
            request["max_tokens"] = self.config.max_tokens
        async with AsyncOpenAI(base_url=endpoint, api_key=secret, max_retries=2) as client:
            completion = await client.chat.completions.create(**request)
        text = completion.choices[0].message.content or "" if completion.choices else ""
        return ProgramResult(exit_code=0, stdout=text, stderr="")
