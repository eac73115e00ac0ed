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
    arithmetic.tasks.update(status="approved")  # what a trainer may see
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


@pytest.mark.parametrize("body", [b"[" * 100_000 + b"]" * 100_000, b'{"a": ' * 5000 + b"1" + b"}" * 5000])
def test_deeply_nested_json_is_a_400_not_a_crash(client, body):
    from django.contrib.auth import get_user_model

    from accounts.services import api_token_create
    from tests.conftest import make_user

    trainer = make_user(get_user_model(), "trainer-deep", "trainers")
    secret = api_token_create(user=trainer, name="t", scopes=["verify"])[1]
    response = client.post(
        "/api/v1/verify", body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {secret}"
    )
    assert response.status_code == 400 and "JSON" in response.json()["detail"]


def test_a_body_over_the_limit_is_refused_before_parsing(client, settings):
    from django.contrib.auth import get_user_model

    from accounts.services import api_token_create
    from tests.conftest import make_user

    settings.PASSBAND_API_MAX_BODY_BYTES = 1000
    trainer = make_user(get_user_model(), "trainer-big", "trainers")
    secret = api_token_create(user=trainer, name="t", scopes=["verify"])[1]
    body = b'{"completion": "' + b"x" * 2000 + b'", "verifier": {"kind": "exact"}, "answer": "x"}'
    response = client.post(
        "/api/v1/verify", body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {secret}"
    )
    assert response.status_code == 400 and "over 1,000 bytes" in response.json()["detail"]


def test_the_task_prompt_is_passed_to_the_verifier(client, verify_token, alice, arithmetic):
    import_tasks(arithmetic, alice, math_task("add", "What is 17 + 25?", "42"))
    arithmetic.tasks.update(status="approved")
    # As the probe scores it: an answer that only restates the question is no answer.
    restated = post(client, verify_token, {"task": "add", "completion": "17 + 25"}).json()
    assert restated["outcome"] == "fail" and "unworked" in restated["detail"]
    assert post(client, verify_token, {"task": "add", "completion": "17 + 25 = 42"}).json()["outcome"] == "pass"


def test_an_inline_prompt_is_text_or_messages_and_only_with_a_verifier(client, verify_token, alice, arithmetic):
    inline = {"verifier": {"kind": "math"}, "answer": "42", "completion": "17 + 25"}
    # An unworked expression is not its value, with or without the prompt (docs/verifiers.md).
    assert post(client, verify_token, inline).json()["outcome"] == "fail"
    messages = [{"role": "user", "content": "What is 17 + 25?"}]
    assert post(client, verify_token, inline | {"prompt": messages}).json()["outcome"] == "fail"
    response = post(client, verify_token, inline | {"prompt": {"text": "What is 17 + 25?"}})
    assert response.status_code == 400 and "prompt" in response.json()["fields"]
    import_tasks(arithmetic, alice, math_task("add", "What is 17 + 25?", "42"))
    arithmetic.tasks.update(status="approved")
    response = post(client, verify_token, {"task": "add", "prompt": "What is 2 + 2?", "completion": "4"})
    assert response.status_code == 400 and "prompt" in response.json()["fields"]


def test_a_tool_the_task_does_not_offer_is_never_paid_by_key_or_inline(client, verify_token, alice):
    """A trainer's single-turn completion calling a tool its task does not offer is not replayed, and fails."""
    from curation.services import environment_create
    from tests.engine.episodes.test_offered import booking

    verifier, tools, answer, shortcut = booking()
    environment = environment_create(name="warehouse", domain="workflow")
    task = {"key": "loss", "prompt": "Book the loss.", "answer": answer, "verifier": verifier, "tools": tools}
    import_tasks(environment, alice, task)
    environment.tasks.update(status="approved")
    refused = post(client, verify_token, {"task": "loss", "completion": shortcut}).json()
    assert refused["outcome"] == "fail" and "ship_order, which the task does not offer" in refused["detail"]
    assert post(client, verify_token, {"task": "loss", "completion": answer}).json()["outcome"] == "pass"
    inline = {"verifier": verifier, "answer": answer, "tools": tools, "completion": shortcut}
    assert post(client, verify_token, inline).json()["outcome"] == "fail"


def test_model_written_code_sent_to_verify_sees_nothing_of_the_server(client, verify_token):
    """A reward-seeking policy's code imports Django to read the server's settings: in the code sandbox
    only the standard library (and declared packages) exist, and Passband itself cannot be declared."""
    verifier = {"kind": "code", "style": "asserts", "asserts": ["assert solve() == 42"]}
    completion = (
        "def solve():\n    import django, importlib\n    importlib.import_module('passband.settings')\n    return 42\n"
    )
    body = post(client, verify_token, {"verifier": verifier, "completion": completion}).json()
    assert body["outcome"] == "fail" and "No module named 'django'" in body["detail"]
    response = post(client, verify_token, {"verifier": {**verifier, "packages": ["passband"]}, "completion": "x = 1"})
    assert response.status_code == 400 and "packages: passband is Passband itself" in response.json()["detail"]
