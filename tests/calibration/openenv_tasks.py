"""Tasks on the OpenEnv server generated from openenv-core's template (tests/support/openenv_template_server.py),
and scripted policies for them.

Each task picks its world by the verifier's `seed`: the reset observation (shown to the model after
the prompt) names the word to echo. `oracle` calls `step` with that word (the environment then says
done); `null_policy` answers at once, stepping nothing; `says_word_does_not_step` answers the word
in words, which a Passband check passes and the environment does not.
"""

import json
import re

from tests.support.openenv_template_server import word_for

SEEDS = (1, 2, 5)
_WORD = re.compile(r"Echo the word: (\w+)")


def openenv_task(seed: int, *, reward: str = "environment") -> dict:
    verifier = {"kind": "episode_reward", "reward": reward, "seed": seed}
    if reward == "verifier":
        verifier["check"] = {"kind": "exact"}
    return {
        "key": f"echo-{seed}",
        "prompt": [{"role": "user", "content": "Echo the word the environment gives you with the step tool."}],
        "answer": word_for(seed),
        "verifier": verifier,
        "domain": "tool use",
    }


def _word(prompt_text: str) -> str:
    match = _WORD.search(prompt_text)
    assert match, f"no first observation in the prompt {prompt_text[:300]!r}"
    return match.group(1)


def oracle(prompt_text: str, seed: int) -> str:
    """Step with the word the first observation names; answer it if asked to go on."""
    if prompt_text.count("<tool>") == 0:
        return f"<tool_call>{json.dumps({'name': 'step', 'arguments': {'message': _word(prompt_text)}})}</tool_call>"
    return _word(prompt_text)


def null_policy(prompt_text: str, seed: int) -> str:
    return "I cannot do that."


def says_word_does_not_step(prompt_text: str, seed: int) -> str:
    return _word(prompt_text)
