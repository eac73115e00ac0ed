"""``episode_reward``: a task on a remote server (MCP or OpenEnv) says whose reward counts, its or Passband's.

Config::

    {"kind": "episode_reward",
     "reward": "environment",              # or "verifier": which reward the verdict is
     "pass_at": 1.0,                       # an environment reward >= this passes (default 1.0)
     "reward_arguments": {"key": "answer", "expect": "42"},
                                           # MCP: the arguments of the server's reward tool (default {})
     "aggregate": "last",                  # OpenEnv: "last" (the last reward given, default) or "sum"
                                           # (of the step rewards)
     "seed": 17,                           # OpenEnv: the seed each episode's reset gets (default: none)
     "check": {"kind": "numeric"}}         # a Passband verifier, run on the episode's final message;
                                           # required when reward is "verifier", optional otherwise

The completion is the episode transcript that rollouts on a remote server store: its
``final_state`` holds ``environment_reward`` (what an MCP server's reward tool gave, see
engine/episodes/remote_mcp.py; an OpenEnv server's last reward and its ``step_rewards``, see
engine/episodes/remote_openenv.py), its ``messages`` the conversation (the last assistant message is
what ``check`` reads). The verdict is the chosen reward's. When both rewards exist and disagree
(one passes, the other does not), the verdict's detail starts with ``REWARD_DISAGREEMENT`` and the
rollout is flagged (``disagrees``). Only what both sides saw is compared: an episode the environment
ended (stop reason ``done``) gave the model no last turn, so its last message is no answer for
``check`` to judge, and no disagreement is flagged.

The import audit (``audit_task``): a task whose reward is the environment's needs no ``check``, since
only its server can judge it; a task with a ``check`` has that check audited on the reference answer.

A completion that is not an episode (text: an author's reference answer in the import audit) has
no environment reward: ``check`` judges it when there is one, else it fails, saying why.
An environment reward the server could not give (its reward tool failed or returned no number
in [0, 1]) is an ``error``: no evidence, counted, never a wrong answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.verifiers.base import Check, ConfigReader, VerifierConfigError, errored, failed
from engine.verifiers.kind import KindExample, KindExports, VerifierKind

KIND = "episode_reward"
REWARDS = ("environment", "verifier")
AGGREGATES = ("last", "sum")
REWARD_DISAGREEMENT = "rewards disagree"
_NOT_CHECKS = (KIND, "state_check")


@dataclass(frozen=True)
class EpisodeRewardConfig:
    reward: str
    pass_at: float
    reward_arguments: dict[str, Any]
    check: dict[str, Any] | None
    aggregate: str = "last"
    seed: int | None = None


def parse_config(raw: dict[str, Any]) -> EpisodeRewardConfig:
    from engine import verifiers

    reader = ConfigReader(raw, kind=KIND)
    reward = reader.string("reward", choices=REWARDS)
    # No upper bound: an OpenEnv environment's rewards are its own scale (MCP reward tools give [0, 1]).
    pass_at = reader.number("pass_at", 1.0, minimum=0.0, exclusive_minimum=True)
    reward_arguments = reader.mapping("reward_arguments", {})
    aggregate = reader.string("aggregate", "last", choices=AGGREGATES)
    seed = reader.integer("seed", minimum=0) if reader.has("seed") else None
    check = reader.mapping("check") if reader.has("check") else None
    reader.finish()
    if reward == "verifier" and check is None:
        raise VerifierConfigError("check", "is required when reward is 'verifier' (the Passband verifier to run)")
    if check is not None:
        if check.get("kind") in _NOT_CHECKS:
            raise VerifierConfigError(
                "check.kind", f"must be a verifier of the final message, not {check.get('kind')!r}"
            )
        try:
            verifiers.validate_config(check)
        except VerifierConfigError as error:
            raise VerifierConfigError(f"check.{error.field}", error.problem) from None
    return EpisodeRewardConfig(
        reward=reward,
        pass_at=pass_at,
        reward_arguments=reward_arguments,
        check=check,
        aggregate=aggregate,
        seed=seed,
    )


def is_episode(completion: Any) -> bool:
    return isinstance(completion, Mapping) and "final_state" in completion and "messages" in completion


def final_message(completion: Any) -> str:
    """The text the model ended with: the last assistant message of an episode, or the completion."""
    if not is_episode(completion):
        return completion if isinstance(completion, str) else ""
    for message in reversed(completion.get("messages") or []):
        if isinstance(message, Mapping) and message.get("role") == "assistant":
            content = message.get("content")
            return content if isinstance(content, str) else ""
    return ""


def environment_reward(completion: Any, *, aggregate: str = "last") -> tuple[float | None, str]:
    """The environment's reward in an episode, and its detail (None and why when there is none).
    `aggregate` "sum": the sum of an OpenEnv episode's step rewards (0 when it took no step)."""
    state = completion.get("final_state") if is_episode(completion) else None
    if aggregate == "sum":
        steps = state.get("step_rewards") if isinstance(state, Mapping) else None
        if not isinstance(steps, list):
            return None, "the environment gave no step rewards to sum (aggregate 'sum' is for OpenEnv servers)"
        given = [reward for reward in steps if isinstance(reward, (int, float)) and not isinstance(reward, bool)]
        if steps and not given:
            return None, "the environment gave no reward for any step"
        return float(sum(given)), f"the sum of {len(steps)} step rewards"
    entries = state.get("environment_reward") if isinstance(state, Mapping) else None
    if not entries or not isinstance(entries, list) or not isinstance(entries[0], Mapping):
        return None, "the server gave no environment reward (it has no reward tool, or the episode did not end)"
    entry = entries[0]
    reward = entry.get("reward")
    if isinstance(reward, bool) or not isinstance(reward, (int, float)):
        return None, str(entry.get("detail") or "the reward tool gave no reward")
    return float(reward), str(entry.get("detail") or "")


def check(config: EpisodeRewardConfig, *, completion: Any, answer: str | None, prompt: Any = None) -> Check:
    from engine import verifiers

    passband = None
    if config.check is not None:
        passband = verifiers.verify(
            verifier=config.check, completion=final_message(completion), answer=answer, prompt=prompt
        )
    if not is_episode(completion):
        if passband is None:
            return failed("not an episode: the environment's reward needs an episode on its server")
        return Check(passband.outcome, f"offline, the Passband check judges: {passband.detail}")
    reward, reward_detail = environment_reward(completion, aggregate=config.aggregate)
    environment_passes = None if reward is None else reward >= config.pass_at
    verifier_passes = (
        None if passband is None or passband.outcome not in ("pass", "fail") else passband.outcome == "pass"
    )
    described_environment = (
        f"environment reward {reward:g} ({'pass' if environment_passes else 'fail'} at {config.pass_at:g})"
        if reward is not None
        else f"no environment reward ({reward_detail})"
    )
    described_verifier = f"Passband check {passband.outcome} ({passband.detail})" if passband is not None else ""
    # The environment ended the episode before the model's last turn: there is no final answer to compare.
    compared = completion.get("stop_reason") != "done"
    if passband is not None and not compared:
        described_verifier += "; not compared: the environment ended the episode before the model's last turn"
    both = "; ".join(part for part in (described_environment, described_verifier) if part)
    disagreement = (
        compared
        and environment_passes is not None
        and verifier_passes is not None
        and environment_passes != verifier_passes
    )
    prefix = f"{REWARD_DISAGREEMENT}: " if disagreement else ""
    if config.reward == "environment":
        if reward is None:
            return errored(f"{prefix}{both}")
        return Check("pass" if environment_passes else "fail", f"{prefix}{both}")
    assert passband is not None
    return Check(passband.outcome, f"{prefix}{both}")


def disagrees(detail: str) -> bool:
    """Whether a verdict of this kind found the two rewards disagreeing (the rollout is flagged)."""
    return detail.startswith(REWARD_DISAGREEMENT)


def audit_task(config: EpisodeRewardConfig, answer: str | None) -> list[str]:
    """The import audit: nothing to check offline when the environment's reward counts and there is no
    ``check`` (only the server can judge); else the ``check``'s own audit on the reference answer."""
    from engine import verifiers

    if config.check is None:
        return []
    return [f"check: {problem}" for problem in verifiers.audit(verifier=config.check, answer=answer)]


def _episode(reward: float, said: str) -> dict[str, Any]:
    return {
        "final_state": {"environment_reward": [{"reward": reward}]},
        "messages": [{"role": "assistant", "content": said}],
    }


VERIFIER_KIND = VerifierKind(
    name=KIND,
    parse_config=parse_config,
    check=check,
    audit_task=audit_task,
    exports=KindExports(),
    examples=(
        KindExample(
            {"kind": KIND, "reward": "environment", "check": {"kind": "exact"}},
            passing=_episode(1.0, "42"),
            failing=_episode(0.0, "41"),
            answer="42",
        ),
    ),
)
