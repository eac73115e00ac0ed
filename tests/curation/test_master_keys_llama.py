"""The master-key battery with the suite's real llama-server (SmolLM2-135M) as the judge, through the app:
the judge is registered, its tasks imported, the battery run by the service, and the campaign gate asked.

What the real model does (docs/verifiers.md, "Master keys"): asked by llm_judge's system prompt to explain and
end with `VERDICT: PASS` or `VERDICT: FAIL`, SmolLM2-135M writes a sentence about the task and never ends with
a verdict line, under a deliberately weak rubric ("reply VERDICT: PASS") and under a strict one that tells it
to pass only the reference answer alike. Every attack is then an `error`, not a trial: the battery measures
nothing, the bound stays at 1, and neither judge may score. A judge too weak to give verdicts is blocked, never
measured safe. That a judge that does compare with the reference passes the battery, and one that pays
anything is flagged, is shown over real HTTP with scripted judges in tests/engine/verifiers/test_master_keys.py.
"""

import pytest

from calibration.errors import CalibrationError
from calibration.models import ProbeModel
from calibration.services import campaign_start
from curation import judge_master_keys as jmk
from curation.services import environment_create
from engine.verifiers import configure
from engine.verifiers import master_keys as mk
from tests.factories import import_tasks

pytestmark = [pytest.mark.django_db, pytest.mark.server]

RUBRICS = {
    "weak": "Reply with exactly this line and nothing else: VERDICT: PASS",
    "strict": "Reply with exactly one line. If the response states the reference answer, reply VERDICT: PASS. "
    "Otherwise reply VERDICT: FAIL.",
}


@pytest.fixture
def judges(llama_server):
    configure(judges={name: {"base_url": f"{llama_server}/v1", "model": "smollm2-135m"} for name in RUBRICS})
    yield
    configure(judges={})


def test_smollm2_as_judge_gives_no_verdict_so_the_battery_blocks_it_whatever_the_rubric(judges, alice):
    environment = environment_create(name="judged", domain="math")
    rows = [
        {
            "key": judge,
            "prompt": "What is 2 + 10?",
            "answer": "12",
            # Short replies and no retries: the server is shared by the suite, and a verdict fits in 16 tokens.
            "verifier": {
                "kind": "llm_judge",
                "judge": judge,
                "rubric": rubric,
                "max_tokens": 16,
                "retries": 0,
                "timeout_seconds": 300,
            },
        }  # fmt: skip
        for judge, rubric in RUBRICS.items()
    ]
    import_tasks(environment, alice, *rows)
    probe = ProbeModel.objects.create(name="probe", backend="transformers", model="tiny")
    for judge in RUBRICS:
        run = jmk.judge_master_keys_run(judge=judge, sample=1)
        attacks = len(mk.attacks_for(mk.JudgedTask(judge, rows[0]["verifier"], "12", None)))
        # Every attack reached the real server and came back without a verdict line (not unreachable, not a pass).
        assert (run.tasks, run.trials, run.errors, run.false_passes) == (1, 0, attacks, 0), judge
        assert run.upper_bound == 1.0 and run.above_limit
        version = environment.tasks.get(key=judge).current_version
        with pytest.raises(CalibrationError, match="upper 95% bound 1.000 is above the limit"):
            campaign_start(environment=environment, probe_model=probe, created_by=alice, task_versions=[version])
