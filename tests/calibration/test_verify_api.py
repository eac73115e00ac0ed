"""POST /api/v1/verify: the verifier calibration uses, as a service for trainers."""

import pytest

from accounts.services import api_token_create
from tests.factories import import_tasks, math_task

pytestmark = pytest.mark.django_db
URL = "/api/v1/verify"


@pytest.fixture
def verify_token(charlie):
    return api_token_create(user=charlie, name="grader", scopes=["verify"])[1]


def post(client, token, body):
    return client.post(URL, body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")


def test_grades_against_a_task_by_key(client, verify_token, alice, arithmetic):
    import_tasks(arithmetic, alice, math_task("sum", "What is 2 + 3?", "5"))
    passed = post(client, verify_token, {"task": "sum", "completion": "2 + 3 = 5, so the answer is \\boxed{5}"}).json()
    assert passed["outcome"] == "pass" and passed["reward"] == 1.0 and passed["latency_ms"] >= 0
    failed = post(client, verify_token, {"task": "sum", "completion": "The answer is 6."}).json()
    assert failed["outcome"] == "fail" and failed["reward"] == 0.0


def test_grades_with_an_inline_verifier(client, verify_token):
    body = post(client, verify_token, {"verifier": {"kind": "exact"}, "answer": "Paris", "completion": "Paris"}).json()
    assert body["outcome"] == "pass"


def test_bad_requests_are_named(client, verify_token):
    assert post(client, verify_token, {"completion": "x"}).status_code == 400
    response = post(client, verify_token, {"verifier": {"kind": "telepathy"}, "completion": "x"})
    assert response.status_code == 400 and "telepathy" in str(response.json())
    assert post(client, verify_token, {"task": "missing", "completion": "x"}).status_code == 404


def test_needs_the_verify_scope(client, charlie):
    read_only = api_token_create(user=charlie, name="r", scopes=["read"])[1]
    assert post(client, read_only, {"verifier": {"kind": "exact"}, "answer": "a", "completion": "a"}).status_code == 403
    assert client.post(URL, {}, content_type="application/json").status_code == 401
