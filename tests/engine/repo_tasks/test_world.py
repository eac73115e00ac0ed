"""The repository episode world: tools on the rollout's own copy, each call in the sandbox."""

import json
from dataclasses import replace

from engine.repo_tasks.grading import grade
from engine.repo_tasks.world import RepoWorld, RepoWorldLimits
from engine.verifiers import verify
from tests.engine.repo_tasks.tiny_repo import BUGGY_OPS, FIXED_OPS, REFERENCE_PATCH, SNAPSHOT, SPEC


def content(reply):
    return json.loads(reply.content)


def test_the_tools_read_search_edit_and_run_on_the_rollouts_copy():
    world = RepoWorld(snapshot=SNAPSHOT)
    assert "calc/ops.py" in content(world.call("list_files", {}))["files"]
    assert "7:     return max(low, value)" in content(world.call("read_file", {"path": "calc/ops.py"}))["text"]
    assert content(world.call("search", {"pattern": r"max\("}))["matches"] == [
        "calc/ops.py:7:     return max(low, value)"
    ]
    applied = world.call("apply_diff", {"diff": REFERENCE_PATCH})
    assert applied.status == "ok", applied.content
    assert world.overlay == {"calc/ops.py": FIXED_OPS}
    ran = content(world.call("run_tests", {"paths": ["tests/test_ops.py"]}))
    assert ran["exit_code"] == 0 and "2 passed" in ran["output"]
    state = world.state()
    assert state["files_changed"] == ["calc/ops.py"]
    assert grade(task=SPEC, snapshot=SNAPSHOT, patch=state["patch"]).outcome == "pass"


def test_reset_is_a_fresh_copy_and_rollouts_share_nothing():
    first, second = RepoWorld(snapshot=SNAPSHOT), RepoWorld(snapshot=SNAPSHOT)
    first.call("write_file", {"path": "calc/ops.py", "content": "broken\n"})
    assert "max(low, value)" in content(second.call("read_file", {"path": "calc/ops.py"}))["text"]
    first.reset()
    assert first.overlay == {} and first.state()["patch"] == ""
    assert content(first.call("read_file", {"path": "calc/ops.py"}))["lines"] == len(BUGGY_OPS.splitlines())


def test_commands_run_in_the_sandbox_without_network():
    world = RepoWorld(snapshot=SNAPSHOT)
    command = "python -c \"import urllib.request; urllib.request.urlopen('http://127.0.0.1:9/', timeout=3)\""
    ran = content(world.call("run_command", {"command": command}))
    assert ran["exit_code"] != 0 and "URLError" in ran["output"]
    outside = world.call("read_file", {"path": "../../etc/passwd"})
    assert outside.status == "bad_arguments" and "outside the repository" in outside.content


def test_a_hanging_command_is_stopped_at_the_call_limit_and_the_episode_budget_holds():
    world = RepoWorld(snapshot=SNAPSHOT, limits=replace(RepoWorldLimits(), call_seconds=4, episode_seconds=6))
    hung = content(world.call("run_command", {"command": "sleep 60"}))
    assert hung["timed_out"] is True and hung["exit_code"] is None
    replies = [world.call("run_command", {"command": "sleep 60"}) for _ in range(4)]
    assert replies[-1].status == "timeout" and "tool time are spent" in replies[-1].content


def test_edits_to_the_tests_in_the_episode_are_not_graded():
    world = RepoWorld(snapshot=SNAPSHOT)
    world.call("write_file", {"path": "tests/test_ops.py", "content": "def test_clamp_high():\n    pass\n"})
    result = grade(task=SPEC, snapshot=SNAPSHOT, patch=world.state()["patch"])
    assert result.outcome == "fail" and "tests/test_ops.py (a hidden test file)" in result.dropped


def test_an_episode_stopped_by_a_tool_timeout_is_a_timeout_verdict():
    verifier = {
        "kind": "repo_tests",
        "snapshot": SPEC.snapshot,
        "fail_to_pass": list(SPEC.fail_to_pass),
        "hidden_tests": SPEC.hidden_tests,
    }
    stopped = {"turns": [], "stop_reason": "tool_timeout", "final_state": None}
    verdict = verify(verifier=verifier, completion=stopped)
    assert (verdict.outcome, verdict.reward) == ("timeout", None)
    answered = {"turns": [], "stop_reason": "answered", "final_state": {"files_changed": [], "patch": ""}}
    assert verify(verifier=verifier, completion=answered).detail == "the episode changed no file"
