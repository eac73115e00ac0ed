"""Judge master keys in the app: queued when judged tasks are written, stored per judge, shown on the judge's
page, and a gate on campaigns: a judge the attacks fool, or one never measured, scores nothing until staff
override (audited). Judges are served over real HTTP (tests/support/openai_server.py)."""

import pytest

from accounts.models import AuditEvent
from calibration.errors import CalibrationError
from calibration.models import ProbeModel
from calibration.services import campaign_start
from curation import judge_master_keys as jmk
from curation import tasks as curation_tasks
from curation.errors import CurationError
from curation.models import JudgeMasterKeyRun
from curation.services import environment_create
from engine.verifiers import configure
from tests.engine.verifiers.test_master_keys import lenient, strict
from tests.factories import import_tasks
from tests.support.openai_server import OpenAITestServer

pytestmark = pytest.mark.django_db


@pytest.fixture
def judges():
    """Two registered judges on real HTTP servers: `lenient` passes anything, `strict` compares with the reference."""
    with OpenAITestServer(respond=lenient) as loose, OpenAITestServer(respond=strict) as tight:
        configure(
            judges={
                "lenient": {"base_url": loose.base_url, "model": "fake-judge"},
                "strict": {"base_url": tight.base_url, "model": "fake-judge"},
            }
        )
        yield
    configure(judges={})


@pytest.fixture
def judged(judges, alice, monkeypatch):
    """An environment of judged tasks: 3 for `lenient`, 21 for `strict` (more than a sample of 20); the judges'
    battery runs are recorded, not sent to a broker."""
    queued = []
    monkeypatch.setattr(curation_tasks.judge_master_keys, "delay", queued.append)
    environment = environment_create(name="essays", domain="writing")
    rows = [
        {
            "key": f"{judge}-{index}",
            "prompt": f"What is {index} + 10? Explain.",
            "answer": str(index + 10),
            "verifier": {"kind": "llm_judge", "judge": judge, "rubric": "Pass only the right number.", "retries": 0},
        }
        for judge, count in (("lenient", 3), ("strict", 21))
        for index in range(count)
    ]
    import_tasks(environment, alice, *rows)
    return environment, queued


@pytest.fixture
def probe():
    return ProbeModel.objects.create(name="probe", backend="transformers", model="tiny")


def start(environment, probe, user, judge):
    versions = [task.current_version for task in environment.tasks.filter(key__startswith=f"{judge}-")]
    return campaign_start(
        environment=environment, probe_model=probe, created_by=user, task_versions=versions, enqueue=False
    )


def test_writing_judged_tasks_queues_the_battery_of_each_judge(judged, django_capture_on_commit_callbacks, alice):
    environment, queued = judged
    with django_capture_on_commit_callbacks(execute=True):
        import_tasks(environment, alice, {"key": "more", "prompt": "?", "answer": "1", "verifier": {
            "kind": "llm_judge", "judge": "strict", "rubric": "r"}})  # fmt: skip
    assert sorted(queued) == ["lenient", "strict"]
    assert curation_tasks.judge_master_keys.run("strict").endswith("/180")  # the task itself: 20 tasks x 9 attacks


def test_a_judge_never_measured_or_fooled_scores_nothing_until_staff_override(judged, probe, alice, bob, staff):
    environment, _ = judged
    with pytest.raises(CalibrationError, match="has not met the master-key battery"):
        start(environment, probe, alice, "lenient")
    run = jmk.judge_master_keys_run(judge="lenient", started_by=staff)
    assert (run.tasks, run.trials, run.false_passes, run.upper_bound) == (3, 27, 27, 1.0) and run.above_limit
    assert {finding["label"] for finding in run.findings} >= {"colon", "solution label", "refusal", "restated rubric"}
    with pytest.raises(CalibrationError, match=r"passed 27 of 27 master-key attacks.*above the limit"):
        start(environment, probe, alice, "lenient")
    with pytest.raises(CurationError, match="Only staff"):
        jmk.judge_scoring_override(judge="lenient", staff=bob, reason="trust me")
    with pytest.raises(CurationError, match="reason"):
        jmk.judge_scoring_override(judge="lenient", staff=staff, reason="  ")
    jmk.judge_scoring_override(judge="lenient", staff=staff, reason="pilot run, every rollout reviewed")
    assert start(environment, probe, alice, "lenient").items.count() == 3
    assert AuditEvent.objects.filter(action="judge_scoring_override", actor=staff).exists()
    # A new run needs its own override: the old one covered the evidence staff saw.
    jmk.judge_master_keys_run(judge="lenient")
    with pytest.raises(CalibrationError, match="above the limit"):
        start(environment, probe, alice, "lenient")


def test_a_strict_judge_measured_on_twenty_tasks_scores(judged, probe, alice, staff):
    environment, _ = judged
    run = jmk.judge_master_keys_run(judge="strict")
    assert (run.tasks, run.trials, run.false_passes, run.findings) == (20, 180, 0, [])
    assert run.upper_bound < 0.05 and not run.above_limit
    assert start(environment, probe, alice, "strict").items.count() == 21
    with pytest.raises(CurationError, match="nothing to override"):
        jmk.judge_scoring_override(judge="strict", staff=staff, reason="x")


def test_unknown_judges_and_judges_without_tasks_are_refused(judges):
    with pytest.raises(CurationError, match="registered"):
        jmk.judge_master_keys_run(judge="nobody")
    with pytest.raises(CurationError, match="grades no task"):
        jmk.judge_master_keys_run(judge="strict")
    assert not JudgeMasterKeyRun.objects.exists()


def test_the_judge_page_shows_the_bound_and_staff_run_and_override(
    client, judged, staff, bob, django_capture_on_commit_callbacks
):
    environment, queued = judged
    jmk.judge_master_keys_run(judge="lenient")
    client.force_login(bob)
    page = client.get("/judges/lenient/").content.decode()
    assert 'id="master-keys-bound">1.0000' in page and "above the limit" in page and 'id="master-keys-block"' in page
    assert "Run the battery" not in page  # staff only
    assert client.post("/judges/lenient/override/", {"reason": "x"}).status_code in (302, 403)
    assert JudgeMasterKeyRun.objects.get().override_at is None
    client.force_login(staff)
    queued.clear()
    with django_capture_on_commit_callbacks(execute=True):
        client.post("/judges/lenient/master-keys/")
    assert queued == ["lenient"]
    client.post("/judges/lenient/override/", {"reason": "reviewed by hand"})
    page = client.get("/judges/lenient/").content.decode()
    assert "overridden by sam: reviewed by hand" in page and 'id="master-keys-block"' not in page


def test_the_api_gives_each_judges_latest_run(client, judged, staff, alice):
    from accounts.services import api_token_create

    jmk.judge_master_keys_run(judge="lenient")
    jmk.judge_master_keys_run(judge="strict")
    secret = api_token_create(user=alice, name="mine", scopes=["read"])[1]
    rows = client.get("/api/v1/judges/master-keys", HTTP_AUTHORIZATION=f"Bearer {secret}").json()
    by_judge = {row["judge"]: row for row in rows}
    assert (by_judge["lenient"]["false_passes"], by_judge["lenient"]["may_score"]) == (27, False)
    assert (by_judge["strict"]["trials"], by_judge["strict"]["false_passes"], by_judge["strict"]["may_score"]) == (
        180,
        0,
        True,
    )
    assert by_judge["strict"]["upper_bound"] < 0.05 and "findings" not in by_judge["lenient"]
    jmk.judge_scoring_override(judge="lenient", staff=staff, reason="reviewed")
    rows = client.get("/api/v1/judges/master-keys", HTTP_AUTHORIZATION=f"Bearer {secret}").json()
    assert {row["judge"]: row["may_score"] for row in rows} == {"lenient": True, "strict": True}
    assert client.get("/api/v1/judges/master-keys").status_code == 401
