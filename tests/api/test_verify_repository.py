"""POST /api/v1/verify on repository tasks: the tampering battery, graded together, refused.

The whole battery on a second library's task (textkit) and a representative part of it on a demo
task (inflection), in one request each ('completions'): the reference passes, no patch fails, every
battery patch is refused, the attacks on the tests themselves as ``tampered`` naming the evidence.
"""

import pytest

from accounts.services import api_token_create
from curation import repo_demo
from curation.repo_snapshots import snapshot_store
from engine.repo_tasks import snapshots
from engine.repo_tasks.tampering import tampering_patches
from tests.engine.repo_tasks.second_library import TASKS
from tests.engine.repo_tasks.test_battery import TAMPERED
from tests.engine.repo_tasks.test_second_library import REPRESENTATIVE

pytestmark = pytest.mark.django_db
URL = "/api/v1/verify"
FRAME = {"rewriting the test's expected value in its frame": "argument 'expected' was rewritten"}


@pytest.fixture
def verify_token(charlie):
    return api_token_create(user=charlie, name="grader", scopes=["verify"])[1]


def verify_battery(client, token, *, verifier, answer, files, only=None, tampered=TAMPERED):
    test_files = sorted({test_id.split("::")[0] for test_id in verifier["fail_to_pass"] + verifier["pass_to_pass"]})
    battery = [
        (label, patch)
        for label, patch in tampering_patches(files, test_files=test_files)
        if only is None or label in only
    ]
    completions = [answer, "no patch here"] + [f"```diff\n{patch}```" for _, patch in battery]
    response = client.post(
        URL,
        {"verifier": verifier, "answer": answer, "completions": completions},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )
    assert response.status_code == 200, response.content
    reference, nothing, *verdicts = response.json()["verdicts"]
    assert reference["outcome"] == "pass" and reference["reward"] == 1.0, reference
    assert nothing["outcome"] == "fail" and nothing["reward"] == 0.0
    for (label, _), verdict in zip(battery, verdicts, strict=True):
        assert verdict["outcome"] in ("fail", "tampered"), f"{label}: {verdict}"
        assert verdict["reward"] == 0.0, f"{label}: {verdict}"
        if label in tampered:
            assert verdict["outcome"] == "tampered" and tampered[label] in verdict["detail"], f"{label}: {verdict}"
    return battery


def test_the_whole_battery_is_refused_on_a_second_library_task(client, verify_token, media):
    task = TASKS["roman"]
    snapshot_store(data=task.snapshot)
    verifier = {
        "kind": "repo_tests",
        "snapshot": task.spec.snapshot,
        "fail_to_pass": list(task.spec.fail_to_pass),
        "pass_to_pass": list(task.spec.pass_to_pass),
        "hidden_tests": task.spec.hidden_tests,
        "timeout_seconds": 20,
    }
    battery = verify_battery(
        client,
        verify_token,
        verifier=verifier,
        answer=f"```diff\n{task.reference}```",
        files=task.files,
        tampered={**TAMPERED, **FRAME},
    )
    assert len(battery) >= 40


def test_a_representative_battery_is_refused_on_a_demo_task(client, verify_token, media):
    row = next(repo_demo.task_rows(store=snapshot_store))
    files = {
        path: data.decode()
        for path, data in snapshots.read_files(snapshots.load(row["verifier"]["snapshot"])).items()
        if path.endswith(".py")
    }
    verifier = {key: value for key, value in row["verifier"].items()}
    verify_battery(client, verify_token, verifier=verifier, answer=row["answer"], files=files, only=REPRESENTATIVE)
