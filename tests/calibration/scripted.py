"""Scripted probe models for calibration tests: the fake OpenAI server answers each task right
with a pass rate chosen per task, from the request's seed, so outcome streams are reproducible."""

from __future__ import annotations

import contextlib
import json
import random
import re
from collections.abc import Iterator

from calibration import services
from calibration.models import Campaign, ProbeModel, VariantProbe
from curation.models import Task
from tests.factories import import_tasks
from tests.support.openai_server import OpenAITestServer
from tests.support.workers import running_worker, wait_for

RIGHT, WRONG = "right", "wrong"
_KEY = re.compile(r"\[([^\]]+)\]")


def scripted_task(key: str, **extra) -> dict:
    """A task whose prompt names its key, so the scripted model knows which pass rate to use."""
    return {"key": key, "prompt": f"[{key}] Say the word.", "answer": RIGHT, "verifier": {"kind": "exact"}, **extra}


def import_scripted(environment, owner, keys) -> None:
    import_tasks(environment, owner, *[scripted_task(key) for key in keys])


def respond_with(pass_rates: dict[str, float]):
    """A `respond(prompt, seed)` for OpenAITestServer: right with the task's pass rate, per seed."""

    def respond(prompt_text: str, seed: int) -> str:
        key = _KEY.search(prompt_text).group(1)
        return RIGHT if random.Random(f"{seed}|{key}").random() < pass_rates[key] else WRONG

    return respond


@contextlib.contextmanager
def scripted_model(name: str, pass_rates: dict[str, float], **fields) -> Iterator[tuple[ProbeModel, OpenAITestServer]]:
    """A probe model served by a fake OpenAI server with scripted pass rates (for the block)."""
    with OpenAITestServer(respond=respond_with(pass_rates), record_requests=False) as server:
        model = services.probe_model_add(name=name, backend="openai", base_url=server.base_url, model="fake-model")
        if fields:
            ProbeModel.objects.filter(pk=model.pk).update(**fields)
            model.refresh_from_db()
        yield model, server


def answers_every_task(environment, *, question: re.Pattern, asked=lambda content: content, reply: str):
    """A `respond(prompt, seed)` that answers every task of the environment right: `question` finds (group 1) in
    the rendered prompt what `asked` makes of a task's last message, and the reply is `reply` with {answer}."""
    answers = {
        asked(task.current_version.prompt[-1]["content"]): task.current_version.answer
        for task in Task.objects.filter(environment=environment).select_related("current_version")
    }
    return lambda prompt_text, seed: reply.format(answer=answers[question.search(prompt_text).group(1)])


def calls_then_done(solutions: dict[str, list[dict]]):
    """A model that answers a task's first turn with its tool calls (``solutions``: the task's key, as the prompt
    writes it in brackets, to its calls), every later turn with "Done."."""

    def respond(prompt_text: str, seed: int) -> str:
        if prompt_text.count("<assistant>") > 1:
            return "Done."
        key = next(key for key in solutions if f"[{key}]" in prompt_text)
        return "".join(f"<tool_call>{json.dumps(call)}</tool_call>" for call in solutions[key])

    return respond


def observed_tools(rollout) -> dict[str, str]:
    """What each tool the rollout's episode called answered (its name -> the observation's content)."""
    return {
        observation["name"]: observation["content"]
        for turn in rollout.episode["turns"]
        for observation in turn.get("observations", [])
    }


def cannot_say(prompt_text: str, seed: int) -> str:
    """The null policy: never answers."""
    return "I cannot say."


def probing_worker(extra_env: dict | None = None):
    """One real worker process for `probe_through_a_worker` (a context manager): start it once for every probe
    of a test. `extra_env`: more of its environment (a plug-in's dist-info on its PYTHONPATH)."""
    return running_worker(queues="default,generate,verify", concurrency=1, extra_env=extra_env)


def probe_through_a_worker(
    environment, owner, respond, name: str, *, rollouts: int, seed: int = 1, tool_parser: bool = False, **model_fields
):
    """A campaign of `rollouts` per task (one round) against a scripted model, run by the worker the caller
    started (`probing_worker`) until it is done; returns (the probe model, the campaign). `tool_parser`: the
    server returns tool calls as OpenAI's structured field; `model_fields`: more of the probe model's settings."""
    with OpenAITestServer(respond=respond, record_requests=False, tool_parser=tool_parser) as server:
        model = services.probe_model_add(
            name=name, backend="openai", base_url=server.base_url, model="fake-model", **model_fields
        )
        campaign = services.campaign_start(
            environment=environment,
            probe_model=model,
            created_by=owner,
            rollouts=rollouts,
            round_size=rollouts,
            seed=seed,
        )
        wait_for(
            lambda: Campaign.objects.get(pk=campaign.pk).status == Campaign.Status.DONE,
            timeout=240,
            what="the worker to finish the campaign",
        )
    return model, campaign


def variants_probed_by_a_worker(model, environment, staff, *, rollouts: int, sample: int = 10, seed: int = 5):
    """An impossible-variant probe of `environment` (a sample of its tasks, `rollouts` attempts each) run by the
    worker the caller started (`probing_worker`) until it is done; returns the VariantProbe."""
    probe = services.variant_probe_start(
        environment=environment, probe_model=model, created_by=staff, sample=sample, rollouts=rollouts, seed=seed
    )
    wait_for(
        lambda: VariantProbe.objects.get(pk=probe.pk).status != VariantProbe.Status.RUNNING,
        timeout=240,
        what="the worker to finish the impossible-variant probe",
    )
    probe.refresh_from_db()
    assert probe.status == VariantProbe.Status.DONE, probe.error
    return probe
