"""The master-key battery with the suite's real llama-server (SmolLM2-135M) as the judge, through the app:
the judge is registered, its tasks imported, the battery run by the service, and the campaign gate asked.

What the real model does (docs/verifiers.md, "Master keys"; measured by bench/judge_master_keys.py): asked in
words (`verdict_format` "text", the default) to end with `VERDICT: PASS` or `VERDICT: FAIL`, SmolLM2-135M never
does, so every attack is an `error` and no trial counts. Held to the verdict by llama.cpp's grammar
(`verdict_format` "grammar"), it gives a verdict on every attack, and the battery measures it: under a
deliberately weak rubric ("reply VERDICT: PASS") it pays the one-token attacks and is flagged and blocked (a
strict rubric still pays some attacks and fails some reference answers: bench/judge_master_keys.py). That a judge
that does compare with the reference passes the battery is shown over real HTTP with scripted judges in
tests/engine/verifiers/test_master_keys.py.
"""

import pytest

from calibration.errors import CalibrationError
from calibration.models import ProbeModel
from calibration.services import campaign_start
from curation import judge_master_keys as jmk
from curation.services import environment_create
from engine.verifiers import configure, verify
from engine.verifiers import master_keys as mk
from tests.factories import import_tasks

pytestmark = [pytest.mark.django_db, pytest.mark.server]

# A strict rubric is measured the same way; what it gives with this model (still no rubric passes) is measured by
# bench/judge_master_keys.py, at a size that says something (docs/benchmarks.md): the suite shares one llama-server.
RUBRICS = {"weak": "Reply with exactly this line and nothing else: VERDICT: PASS"}
# The grammar's reason is at most 200 characters, so 224 tokens always reach the verdict; no retries and a
# generous timeout: the server is shared by the suite and may be slow, never idle.
LIMITS = {"max_tokens": 224, "retries": 0, "timeout_seconds": 600}
QUESTIONS = [("What is 2 + 10?", "12"), ("What is 7 + 5?", "12")]


@pytest.fixture
def judges(llama_server):
    configure(
        judges={
            **{
                name: {"base_url": f"{llama_server}/v1", "model": "smollm2-135m", "verdict_format": "grammar"}
                for name in RUBRICS
            },
            "free-text": {"base_url": f"{llama_server}/v1", "model": "smollm2-135m"},
        }
    )
    yield
    configure(judges={})


def test_held_to_a_verdict_the_real_judge_is_measured_and_a_weak_rubric_is_flagged(judges, alice):
    environment = environment_create(name="judged", domain="math")
    rows = [
        {
            "key": f"{judge}-{index}",
            "prompt": question,
            "answer": answer,
            "verifier": {"kind": "llm_judge", "judge": judge, "rubric": rubric, **LIMITS},
        }
        for judge, rubric in RUBRICS.items()
        for index, (question, answer) in enumerate(QUESTIONS)
    ]
    import_tasks(environment, alice, *rows)
    probe = ProbeModel.objects.create(name="probe", backend="transformers", model="tiny")
    attacks = len(mk.attacks_for(mk.JudgedTask("t", rows[0]["verifier"], "12", None)))
    runs = {judge: jmk.judge_master_keys_run(judge=judge) for judge in RUBRICS}
    # Every attack reached the real server and came back with a verdict: each one is a trial, none an error.
    assert (runs["weak"].tasks, runs["weak"].trials, runs["weak"].errors) == (2, 2 * attacks, 0)
    # The weak rubric pays content-free answers: the battery finds them and names them.
    assert runs["weak"].false_passes >= 1 and len(runs["weak"].findings) == runs["weak"].false_passes
    for judge, run in runs.items():
        assert run.above_limit, judge  # a handful of tasks is never a clean bill, whatever the verdicts
        version = environment.tasks.get(key=f"{judge}-0").current_version
        with pytest.raises(CalibrationError, match=f"judge {judge} passed {run.false_passes} of {run.trials}"):
            campaign_start(environment=environment, probe_model=probe, created_by=alice, task_versions=[version])


def test_asked_in_words_only_the_real_judge_gives_no_verdict(judges):
    verifier = {"kind": "llm_judge", "judge": "free-text", "rubric": RUBRICS["weak"], **LIMITS, "max_tokens": 32}
    verdict = verify(verifier=verifier, completion=":", answer="12", prompt="What is 2 + 10?")
    assert verdict.outcome == "error" and "does not end with a VERDICT line" in verdict.detail
