"""POST /api/v1/verify with an installed verifier kind (`word_count`, tests/plugins/passband-example-verifier):
inline and by task, its config errors named like Passband's own kinds', with no change to Passband."""

import pytest

from accounts.services import api_token_create
from tests.factories import import_tasks

pytestmark = pytest.mark.django_db
URL = "/api/v1/verify"
VERIFIER = {"kind": "word_count", "min": 2, "max": 4, "same_first_word": True}


@pytest.fixture
def verify_token(charlie):
    return api_token_create(user=charlie, name="grader", scopes=["verify"])[1]


def post(client, token, body):
    return client.post(URL, body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")


def test_an_installed_kind_grades_inline(client, verify_token):
    body = {"verifier": VERIFIER, "answer": "Paris France", "completion": "Paris is lovely"}
    passed = post(client, verify_token, body).json()
    assert (passed["outcome"], passed["reward"], passed["detail"]) == ("pass", 1.0, "3 words")
    failed = post(client, verify_token, {**body, "completion": "Lyon is lovely"}).json()
    assert (failed["outcome"], failed["reward"]) == ("fail", 0.0)


def test_an_installed_kind_grades_a_task_by_key(client, verify_token, alice, arithmetic):
    task = {
        "key": "capital",
        "prompt": "Name the capital, in a few words.",
        "answer": "Paris France",
        "verifier": VERIFIER,
    }
    report = import_tasks(arithmetic, alice, task, run_audits=True)
    assert report.ok and not report.audit_failures, report.summary()
    arithmetic.tasks.update(status="approved")
    passed = post(client, verify_token, {"task": "capital", "completion": "Paris on the Seine"}).json()
    assert passed["outcome"] == "pass"
    too_long = post(client, verify_token, {"task": "capital", "completion": "Paris " + "and more " * 5}).json()
    assert too_long["outcome"] == "fail" and "not 2 to 4" in too_long["detail"]


def test_an_installed_kinds_config_errors_are_named(client, verify_token):
    response = post(client, verify_token, {"verifier": {"kind": "word_count", "maxx": 3}, "completion": "x"})
    assert response.status_code == 400 and "max: is required for kind 'word_count'" in str(response.json())
    response = post(client, verify_token, {"verifier": {**VERIFIER, "min": 9}, "completion": "x"})
    assert response.status_code == 400 and "min: must be at most max (4), got 9" in str(response.json())
