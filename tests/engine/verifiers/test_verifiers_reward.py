"""The verifiers_reward kind against a verifiers taskset Passband did not write (tests/plugins/vf-word-arithmetic,
installed like any taskset package), read by verifiers' own loader and scored by its own @vf.reward methods."""

import json
from pathlib import Path

import pytest

from engine.integrations import verifiers_tasks
from engine.integrations.release import ReleaseTask, score
from engine.integrations.trl_reward import passband_reward
from engine.integrations.verifiers_tasks import TasksetError
from engine.task_mapping import ColumnMapping
from engine.verifiers import VerifierConfigError, audit, validate_config, verify
from engine.verifiers.gameability import gameability_check

TASKSET = "vf-word-arithmetic"
PLUGGED = Path(__file__).parent / "data" / "vf_plugged_rewards.py"
MAPPING = ColumnMapping(prompt="{prompt}", answer_column="solution", answer_extractor="after_hashes", key_column="key")
BOXED = "\\boxed{{answer}}"


def tasks_of(args=None, **options):
    loaded = verifiers_tasks.taskset_rows(TASKSET, args=args or {})
    tasks, problems = verifiers_tasks.taskset_tasks(loaded, mapping=MAPPING, reference_format=BOXED, **options)
    assert problems == []
    return json.loads(json.dumps(tasks))  # as stored: the probe, the API and a trainer read it so


def verdict(task, completion):
    return verify(verifier=task["verifier"], completion=completion, answer=task["answer"], prompt=task["prompt"])


def plugged(function, name="correct"):
    return {"task": {"rewards": {name: {"fn": f"{PLUGGED}:{function}"}}}}


@pytest.fixture(scope="module")
def task():
    return next(task for task in tasks_of() if task["key"] == "shopping-1")  # Ana spends 14 dollars


def test_rows_are_read_by_verifiers_loader_with_the_taskset_config():
    loaded = verifiers_tasks.taskset_rows(TASKSET, args={"topics": ["travel"]})
    assert [row["key"] for row in loaded.rows] == ["travel-1", "travel-2", "travel-3"]
    assert [row["idx"] for row in loaded.rows] == [0, 1, 2]
    assert loaded.rewards == [{"name": "brief", "weight": 0.25}, {"name": "correct", "weight": 1.0}]
    row = loaded.rows[0]
    assert row["data"]["topic"] == "travel" and row["data"]["solution"].endswith("#### 360")
    assert row["prompt"] == [{"role": "user", "content": row["data"]["prompt"]}]


def test_full_reward_passes_and_a_partial_score_fails_with_the_score_kept(task):
    passed = verdict(task, "3 * 4 + 2 = 14, so \\boxed{14}")
    assert (passed.outcome, passed.reward) == ("pass", 1.0)
    assert passed.detail == "reward 1.25 of 1.25 (brief 1×0.25, correct 1×1)"
    wrong = verdict(task, "\\boxed{15}")  # brief, but wrong: a quarter of the reward
    assert (wrong.outcome, wrong.reward) == ("fail", 0.0)
    assert wrong.detail.startswith("reward 0.25 of 1.25 (brief 1×0.25, correct 0×1); correct short of full")
    rambling = verdict(task, "x" * 3000 + " \\boxed{14}")  # right, but past max_reply_chars
    assert rambling.outcome == "fail" and "reward 1 of 1.25" in rambling.detail and "brief short" in rambling.detail
    assert verdict(task, "I cannot say.").outcome == "fail"
    assert verdict(task, [{"role": "assistant", "content": "\\boxed{14}"}]).outcome == "pass"


def test_completions_that_are_not_a_reply_fail_without_reaching_the_taskset(task):
    assert verdict(task, [{"role": "user", "content": "\\boxed{14}"}]).outcome == "fail"
    assert verdict(task, 14).outcome == "fail"
    assert verdict(task, []).outcome == "fail"


@pytest.mark.parametrize(
    "function, outcome, detail",
    [
        ("raises", "error", "ValueError: the grader has a bug"),
        ("spins", "timeout", "the taskset's score took over 1s"),
        ("ignores_the_deadline", "timeout", "the taskset took over 1s; helper process killed"),
        ("hoards_memory", "error", "MemoryError"),
        ("writes_a_file", "error", "writing files is not allowed while scoring"),
        ("calls_home", "error", "Forbidden: socket.getaddrinfo is not allowed while scoring"),
        ("not_a_number", "error", "reward 'correct' gave score nan"),
        ("needs_a_sandbox", "error", "reward 'correct' needs a runtime"),
    ],
)
def test_a_reward_that_breaks_is_an_error_or_a_timeout_never_a_fail(task, function, outcome, detail):
    verifier = {**task["verifier"], "args": plugged(function), "timeout_seconds": 1}
    result = verify(verifier=verifier, completion="\\boxed{14}", answer="14", prompt=task["prompt"])
    assert (result.outcome, result.reward) == (outcome, None)
    assert detail in result.detail
    assert not Path("/tmp/passband-reward-was-here").exists()
    assert verdict(task, "\\boxed{14}").outcome == "pass"  # the helper that served it serves the next score


def test_a_broken_helper_request_is_an_error(task):
    unknown = verify(verifier={**task["verifier"], "taskset": "no-such-taskset"}, completion="\\boxed{14}")
    assert unknown.outcome == "error" and "taskset 'no-such-taskset' is not installed" in unknown.detail
    refused = verify(verifier={**task["verifier"], "args": {"topics": 5}}, completion="\\boxed{14}")
    assert refused.outcome == "error" and "refused its args" in refused.detail and "topics" in refused.detail
    stale = verify(verifier={**task["verifier"], "data": {"id": "x"}}, completion="\\boxed{14}")
    assert stale.outcome == "error" and "no longer fits WordArithmeticTask" in stale.detail


def test_a_taskset_that_cannot_run_here_is_refused_at_load():
    with pytest.raises(TasksetError, match="reward 'correct' needs a runtime"):
        verifiers_tasks.taskset_rows(TASKSET, args=plugged("needs_a_sandbox"))
    with pytest.raises(TasksetError, match="is not installed"):
        verifiers_tasks.taskset_rows("no-such-taskset")
    with pytest.raises(TasksetError, match="loaded no tasks"):
        verifiers_tasks.taskset_rows(TASKSET, args={"topics": ["cooking"]})


def test_rows_that_lack_a_mapped_field_name_the_row_and_field():
    loaded = verifiers_tasks.taskset_rows(TASKSET, args={"topics": ["baking"]})
    tasks, problems = verifiers_tasks.taskset_tasks(loaded, mapping=None)
    assert tasks == [] and [str(problem) for problem in problems] == [
        "verifiers taskset vf-word-arithmetic, field 'mapping: answer_column': the file has no column 'answer'; "
        "its columns: idx, id, prompt, topic, solution, key"
    ]
    loaded.rows[1]["data"]["solution"] = "no final answer here"
    tasks, problems = verifiers_tasks.taskset_tasks(loaded, mapping=MAPPING)
    assert [str(problem) for problem in problems] == [
        "verifiers taskset vf-word-arithmetic, row 2, field 'solution': has no '####' before a final answer "
        "(the extractor is 'text after ####')"
    ]


def test_the_config_is_checked(task):
    validate_config(task["verifier"])
    with pytest.raises(VerifierConfigError, match="reference_format"):
        validate_config({**task["verifier"], "reference_format": "\\boxed{}"})
    with pytest.raises(VerifierConfigError, match="taskset"):
        validate_config({"kind": "verifiers_reward", "data": {}})


def test_the_audit_passes_the_reference_in_the_taskset_format_and_only_then(task):
    assert audit(verifier=task["verifier"], answer=task["answer"], prompt=task["prompt"]) == []
    bare = {**task["verifier"], "reference_format": "{answer}"}  # no \boxed{}: the rewards refuse it
    assert audit(verifier=bare, answer=task["answer"], prompt=task["prompt"]) == [
        "the reference answer does not pass its verifier: fail (reward 0.25 of 1.25 (brief 1×0.25, correct 0×1); "
        "correct short of full: only the full reward passes)"
    ]
    pays_all = {**task["verifier"], "args": plugged("pays_anything")}
    assert any("empty completion should fail" in problem for problem in audit(verifier=pays_all, answer="14"))


def test_the_gameability_battery_holds_on_the_strict_taskset_and_catches_the_lenient_one(task):
    assert gameability_check(verifier=task["verifier"], answer=task["answer"], prompt=task["prompt"]) == []
    lenient = {**task["verifier"], "args": {"task": {"answer_anywhere": True}}}
    findings = gameability_check(verifier=lenient, answer=task["answer"], prompt=task["prompt"])
    assert [finding.label for finding in findings] == [
        "a hedge in the reference's format",
        "a hedge: another value or the reference",
        "a hedge: both boxed",
    ]
    assert findings[0].completion == "\\boxed{15} or \\boxed{14}"


def test_every_path_that_scores_gives_the_same_verdict(task):
    """verify() (the probe and /api/v1/verify call it), a release row's score() and TRL's reward function."""
    release_task = ReleaseTask(
        task_key=task["key"],
        version_hash="0" * 64,
        prompt=task["prompt"],
        answer=task["answer"],
        verifier=task["verifier"],
        tools=[],
    )
    completions = ["\\boxed{14}", "\\boxed{15}", "14 or 15", "", "\\boxed{15} or \\boxed{14}"]
    expected = [verdict(task, completion).reward for completion in completions]
    assert expected == [1.0, 0.0, 0.0, 0.0, 0.0]
    assert [score(release_task, completion=completion).reward for completion in completions] == expected
    rewards = passband_reward(
        prompts=[task["prompt"]] * len(completions),
        completions=[[{"role": "assistant", "content": completion}] for completion in completions],
        answer=[task["answer"]] * len(completions),
        verifier=[json.dumps(task["verifier"])] * len(completions),
    )
    assert rewards == expected


def test_a_load_that_breaks_names_the_row(tmp_path):
    """verifiers' own NeMo Gym taskset reading a file whose second row lacks its request."""
    dataset = tmp_path / "rows.jsonl"
    first = {"responses_create_params": {"input": [{"role": "user", "content": "Say hi."}]}}
    dataset.write_text(json.dumps(first) + "\n{}\n")
    with pytest.raises(TasksetError, match=r"load\(\) raised at row 2: KeyError: 'responses_create_params'"):
        verifiers_tasks.taskset_rows("nemo-gym", args={"dataset": str(dataset)})


def test_a_taskset_whose_tasks_use_tool_servers_is_refused(tmp_path):
    """verifiers' own NeMo Gym taskset: its tools come from a resources server the probe never starts."""
    dataset = tmp_path / "rows.jsonl"
    dataset.write_text(json.dumps({"responses_create_params": {"input": [{"role": "user", "content": "Say hi."}]}}))
    with pytest.raises(TasksetError, match="use verifiers toolsets"):
        verifiers_tasks.taskset_rows("nemo-gym", args={"dataset": str(dataset)})
