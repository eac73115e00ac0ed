"""``episode_reward``: the reward a task chose (its MCP server's, or its Passband check's), and the flag
when both exist and disagree."""

import pytest

from engine import verifiers
from engine.verifiers import VerifierConfigError
from engine.verifiers.kinds import episode_reward


def episode(reward, final_text, *, detail="d"):
    state = (
        {} if reward == "absent" else {"environment_reward": [{"tool": "grade", "reward": reward, "detail": detail}]}
    )
    return {
        "final_state": state,
        "messages": [
            {"role": "user", "content": "Add 17 and 25 and store it."},
            {"role": "assistant", "content": "", "tool_calls": []},
            {"role": "tool", "content": "42.0"},
            {"role": "assistant", "content": final_text},
        ],
    }


def judge(completion, **config):
    verifier = {"kind": "episode_reward", "reward": "environment", "check": {"kind": "numeric"}, **config}
    return verifiers.verify(verifier=verifier, completion=completion, answer="42")


def test_the_environment_reward_decides_when_the_task_says_so():
    assert judge(episode(1.0, "42")).outcome == "pass"
    assert judge(episode(0.0, "41")).outcome == "fail"
    assert judge(episode(0.5, "42"), pass_at=0.5).outcome == "pass"
    assert judge(episode(0.4, "no"), pass_at=0.5).outcome == "fail"


def test_the_passband_check_decides_when_the_task_says_so():
    assert judge(episode(0.0, "42"), reward="verifier").outcome == "pass"
    assert judge(episode(1.0, "41"), reward="verifier").outcome == "fail"
    # No environment reward at all: the chosen check alone decides, nothing to disagree with.
    only = judge(episode("absent", "42"), reward="verifier")
    assert only.outcome == "pass" and not episode_reward.disagrees(only.detail)


@pytest.mark.parametrize(("reward", "text", "outcome"), [(1.0, "41", "pass"), (0.0, "42", "fail")])
def test_disagreeing_rewards_are_flagged_and_the_chosen_one_counts(reward, text, outcome):
    verdict = judge(episode(reward, text))
    assert verdict.outcome == outcome
    assert episode_reward.disagrees(verdict.detail)
    assert verdict.detail.startswith(episode_reward.REWARD_DISAGREEMENT + ": environment reward")


def test_agreeing_rewards_are_not_flagged():
    assert not episode_reward.disagrees(judge(episode(1.0, "42")).detail)
    assert not episode_reward.disagrees(judge(episode(0.0, "41")).detail)


def test_a_reward_the_server_could_not_give_is_an_error_never_a_wrong_answer():
    verdict = judge(episode(None, "42", detail="the reward tool failed: boom"))
    assert verdict.outcome == "error" and verdict.reward is None
    assert "the reward tool failed: boom" in verdict.detail
    missing = judge(episode("absent", "42"))
    assert missing.outcome == "error" and "no reward tool" in missing.detail


def test_text_is_judged_offline_by_the_check_so_audits_work():
    assert (
        verifiers.audit(
            verifier={"kind": "episode_reward", "reward": "environment", "check": {"kind": "numeric"}}, answer="42"
        )
        == []
    )
    # A check that the reference answer does not pass is a problem of the check, said so.
    problems = verifiers.audit(
        verifier={"kind": "episode_reward", "reward": "environment", "check": {"kind": "numeric"}}, answer="a few"
    )
    assert problems and all(problem.startswith("check: ") for problem in problems)


def test_the_worlds_own_reward_needs_no_check_to_be_imported():
    # Only the server can judge it: the import audit has nothing to run offline, and demands no check.
    assert verifiers.audit(verifier={"kind": "episode_reward", "reward": "environment"}, answer="42") == []
    assert verifiers.audit(verifier={"kind": "episode_reward", "reward": "environment", "seed": 3}, answer="") == []


def test_an_episode_the_environment_ended_is_not_compared_with_an_answer_never_given():
    # OpenEnv said done after the model's step: its last message is the tool call, not an answer. The check
    # judges an empty message; that is not a disagreement with the environment's reward.
    ended = {**episode(1.0, ""), "stop_reason": "done"}
    verdict = judge(ended)
    assert verdict.outcome == "pass" and not episode_reward.disagrees(verdict.detail)
    assert "not compared: the environment ended the episode" in verdict.detail
    # The same empty last message after the model's own last turn is compared, and flagged.
    answered = {**episode(1.0, ""), "stop_reason": "answered"}
    assert episode_reward.disagrees(judge(answered).detail)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"reward": "verifier"}, "check: is required when reward is 'verifier'"),
        ({"reward": "model"}, "reward: must be one of 'environment', 'verifier'"),
        ({"reward": "environment", "pass_at": 0}, "pass_at: must be a number > 0"),
        (
            {"reward": "environment", "check": {"kind": "numeric", "abs_tol": -1}},
            "check.abs_tol: must be a number >= 0",
        ),
        ({"reward": "environment", "check": {"kind": "state_check"}}, "check.kind: must be a verifier of the final"),
        ({"reward": "environment", "reward_args": {}}, "reward_args: unknown field"),
        ({"reward": "environment", "aggregate": "mean"}, "aggregate: must be one of 'last', 'sum'"),
        ({"reward": "environment", "seed": -1}, "seed: must be an integer >= 0"),
        ({"reward": "environment", "seed": "7"}, "seed: must be an integer"),
    ],
)
def test_configs_are_checked_naming_the_field(config, message):
    with pytest.raises(VerifierConfigError) as raised:
        verifiers.validate_config({"kind": "episode_reward", **config})
    assert str(raised.value).startswith(message)


def openenv_episode(step_rewards, *, last):
    """An OpenEnv episode's final state (engine/episodes/remote_openenv.py): the last reward and each step's."""
    completion = episode(last, "")
    completion["final_state"]["step_rewards"] = step_rewards
    return completion


@pytest.mark.parametrize(
    ("aggregate", "step_rewards", "last", "outcome", "reward"),
    [
        # An OpenEnv environment's rewards are its own scale: pass_at 2 with a running total.
        ("sum", [1.0, 0.5, 1.0], 1.0, "pass", 1.0),
        ("sum", [1.0, 0.5], 0.5, "fail", 0.0),
        ("last", [1.0, 0.5, 1.0], 1.0, "fail", 0.0),
        ("last", [0.0, 2.5], 2.5, "pass", 1.0),
        # No step taken: the sum is 0, a fail, never an error.
        ("sum", [], 0.0, "fail", 0.0),
        # Steps that all gave no reward: no evidence.
        ("sum", [None, None], None, "error", None),
    ],
)
def test_an_openenv_reward_is_the_last_or_the_sum_of_the_step_rewards(aggregate, step_rewards, last, outcome, reward):
    verifier = {"kind": "episode_reward", "reward": "environment", "aggregate": aggregate, "pass_at": 2.0, "seed": 7}
    verdict = verifiers.verify(verifier=verifier, completion=openenv_episode(step_rewards, last=last), answer="x")
    assert (verdict.outcome, verdict.reward) == (outcome, reward)


def test_a_sum_over_an_episode_without_step_rewards_is_an_error_saying_so():
    verifier = {"kind": "episode_reward", "reward": "environment", "aggregate": "sum"}
    verdict = verifiers.verify(verifier=verifier, completion=episode(1.0, "42"), answer="42")
    assert verdict.outcome == "error" and "no step rewards to sum" in verdict.detail
