"""Tasks on the test MCP server (tests/support/mcp_kv_server.py), and scripted policies for them.

Each task needs two or three tool calls on the server's per-session key-value store and calculator.
`oracle` is a model server's `respond` that calls the right tools, one per turn, then answers;
`null_policy` answers at once, calling nothing.
"""

import json

# key -> (prompt, the calls that solve it, the final answer, the reward tool's arguments)
PLANS = {
    "sum-store": (
        "Add 17 and 25 with the tools, store the sum under the key 'answer', then reply with the sum.",
        [("add", {"a": 17, "b": 25}), ("put", {"key": "answer", "value": "42"})],
        "The sum is 42.",
        {"key": "answer", "expect": "42"},
    ),
    "product-plus": (
        "Multiply 6 by 7, add 8 to the product, store the result under 'total', then reply with it.",
        [("multiply", {"a": 6, "b": 7}), ("add", {"a": 42, "b": 8}), ("put", {"key": "total", "value": "50"})],
        "The total is 50.",
        {"key": "total", "expect": "50"},
    ),
    "colour-roundtrip": (
        "Store 'blue' under the key 'colour', read it back with get, then reply with what you read.",
        [("put", {"key": "colour", "value": "blue"}), ("get", {"key": "colour"})],
        "blue",
        {"key": "colour", "expect": "blue"},
    ),
}


def mcp_task(key: str, *, reward: str = "environment") -> dict:
    prompt, _calls, answer, reward_arguments = PLANS[key]
    check = {"kind": "exact"} if key == "colour-roundtrip" else {"kind": "numeric"}
    return {
        "key": key,
        "prompt": [{"role": "user", "content": prompt}],
        "answer": "blue" if key == "colour-roundtrip" else answer.rstrip(".").split()[-1],
        "verifier": {"kind": "episode_reward", "reward": reward, "reward_arguments": reward_arguments, "check": check},
        "domain": "tool use",
    }


def _plan_for(prompt_text: str):
    for prompt, calls, answer, _ in PLANS.values():
        if prompt in prompt_text:
            return calls, answer
    raise AssertionError(f"no plan for the prompt {prompt_text[:200]!r}")


def oracle(prompt_text: str, seed: int) -> str:
    """The next step of the plan: one tool call per turn (tool results so far count the steps), then the answer."""
    calls, answer = _plan_for(prompt_text)
    done = prompt_text.count("<tool>")
    if done < len(calls):
        name, arguments = calls[done]
        return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"
    return answer


def null_policy(prompt_text: str, seed: int) -> str:
    return "I cannot do that."


def says_right_does_nothing(prompt_text: str, seed: int) -> str:
    """Gives the right final answer without touching the store: the Passband check passes, the environment's reward does not."""
    _calls, answer = _plan_for(prompt_text)
    return answer
