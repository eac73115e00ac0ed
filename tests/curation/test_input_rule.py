"""One input rule for pages, uploads and the API (engine.input_rules): text without NUL or lone
surrogates, JSON at most 64 levels deep, bodies within their limit. Each refusal is a 400 naming the
field, on SQLite and PostgreSQL alike (PostgreSQL cannot store NUL: these were 500s there)."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from accounts.models import ApiToken
from accounts.services import api_token_create
from curation.models import Comment, Task
from tests.factories import import_tasks, jsonl, math_task

pytestmark = pytest.mark.django_db
NUL = "holds a NUL byte"


def nested_text(depth: int, leaf: str) -> str:
    """JSON text nesting `leaf` `depth` objects deep, built as text (json.dumps would recurse)."""
    return '{"a": ' * depth + leaf + "}" * depth


def api(client, secret, path, body: str | bytes):
    return client.post(path, body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {secret}")


@pytest.fixture
def verify_secret(charlie):
    return api_token_create(user=charlie, name="grader", scopes=["verify"])[1]


@pytest.mark.parametrize(
    ("user", "url", "field"),
    [("alice", "/tasks/?q=%00", "q"), ("bob", "/review/?band=%00", "band"), ("alice", "/tasks/?status=x%00", "status")],
)
def test_a_nul_in_a_query_parameter_is_a_400_naming_it(client, alice, bob, arithmetic, user, url, field):
    import_tasks(arithmetic, alice, math_task("t"))
    client.force_login({"alice": alice, "bob": bob}[user])
    response = client.get(url)
    assert response.status_code == 400
    assert f"{field}: {NUL}" in response.content.decode()


def test_a_nul_in_a_token_name_or_a_comment_is_a_400_naming_it(client, alice, arithmetic):
    import_tasks(arithmetic, alice, math_task("t"))
    client.force_login(alice)
    response = client.post("/tokens/", {"name": "ci\x00token", "scopes": ["read"]})
    assert response.status_code == 400 and f"name: {NUL}" in response.content.decode()
    response = client.post("/tasks/arithmetic/t/comments/", {"body": "looks\x00fine"})
    assert response.status_code == 400 and f"body: {NUL}" in response.content.decode()
    assert not ApiToken.objects.exists() and not Comment.objects.exists()


def editor_form(**changes) -> dict:
    form = {
        "prompt": "What is 1 + 1?",
        "answer": "2",
        "verifier": '{"kind": "math"}',
        "metadata": "{}",
        "tools": "[]",
        "domain": "math",
        "authoring_cost_usd": "0",
    }
    return form | changes


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("metadata", '{"note": "a\\u0000b"}', NUL),
        ("tools", '[{"name": "f\\u0000"}]', NUL),
        ("verifier", '{"kind": "json", "schema": ' + nested_text(130, '{"type": "string"}') + "}", "nests deeper"),
        ("metadata", "[" * 100_000 + "]" * 100_000, "nests deeper"),
    ],
)
def test_the_editor_refuses_hostile_json_naming_the_field(client, alice, arithmetic, field, value, reason):
    import_tasks(arithmetic, alice, math_task("t"))
    client.force_login(alice)
    response = client.post("/tasks/arithmetic/t/edit/", editor_form(**{field: value}))
    assert response.status_code == 400
    assert f"{field}: " in response.content.decode() and reason in response.content.decode()
    assert Task.objects.get(key="t").versions.count() == 1


@pytest.mark.parametrize(
    ("field", "extra"),
    [
        ("answer", {"answer": "5\x00"}),
        ("metadata", {"metadata": {"source": ["ok", "x\x00"]}}),
        ("tools", {"tools": [{"type": "function", "function": {"name": "f\x00"}}]}),
        ("prompt", {"prompt": [{"role": "user", "content": "What is 2 + 3?\x00"}]}),
    ],
)
def test_an_upload_with_a_nul_in_a_field_is_refused_naming_line_and_field(client, alice, arithmetic, field, extra):
    client.force_login(alice)
    data = jsonl(math_task("fine"), math_task("bad") | extra)
    assert b"\\u0000" in data  # the file holds the JSON escape, as a hostile file would
    response = client.post(
        "/tasks/upload/", {"environment": "arithmetic", "file": SimpleUploadedFile("tasks.jsonl", data)}
    )
    page = response.content.decode()
    assert response.status_code == 400
    assert f'<td class="num">2</td><td>{field}</td><td>{NUL}' in page
    assert not Task.objects.exists()


def test_an_upload_with_a_deeply_nested_json_schema_is_refused_naming_the_field(client, alice, arithmetic):
    schema = json.loads(nested_text(130, '{"type": "string"}'))
    client.force_login(alice)
    data = jsonl(math_task("deep", verifier={"kind": "json", "schema": schema}))
    response = client.post(
        "/tasks/upload/", {"environment": "arithmetic", "file": SimpleUploadedFile("tasks.jsonl", data)}
    )
    assert response.status_code == 400
    assert (
        '<td class="num">1</td><td>verifier</td><td>nests deeper than 64 levels at verifier.schema'
        in response.content.decode()
    )
    assert not Task.objects.exists()


@pytest.mark.parametrize(
    ("body", "field", "reason"),
    [
        (
            '{"verifier": ' + nested_text(1000, '{"kind": "exact"}') + ', "completion": "x", "answer": "x"}',
            "verifier",
            "nests deeper",
        ),
        (
            '{"verifier": {"kind": "json", "schema": '
            + nested_text(130, '{"type": "string"}')
            + '}, "completion": "{}"}',
            "verifier",
            "nests deeper",
        ),
        ('{"verifier": {"kind": "exact"}, "answer": "x", "completion": "x\\u0000"}', "completion", NUL),
        ('{"verifier": {"kind": "exact", "x\\u0000": 1}, "answer": "x", "completion": "x"}', "verifier", NUL),
    ],
)
def test_the_api_refuses_hostile_json_naming_the_field(client, verify_secret, body, field, reason):
    response = api(client, verify_secret, "/api/v1/verify", body)
    assert response.status_code == 400
    error = response.json()
    assert set(error) == {"detail", "code", "fields"} and error["code"] == "invalid"
    assert list(error["fields"]) == [field] and reason in error["fields"][field][0]
    assert error["detail"].startswith(f"{field}: ")


def test_a_nul_in_an_api_query_parameter_is_the_api_error(client, charlie):
    secret = api_token_create(user=charlie, name="reader", scopes=["read"])[1]
    response = client.get("/api/v1/tasks?band=%00", HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert response.status_code == 400 and response["Content-Type"] == "application/json"
    assert response.json()["code"] == "invalid" and NUL in response.json()["fields"]["band"][0]


def test_api_bodies_between_django_s_form_limit_and_the_api_s_limit_are_read(client, verify_secret, settings):
    assert settings.DATA_UPLOAD_MAX_MEMORY_SIZE < 5_000_000 < settings.PASSBAND_API_MAX_BODY_BYTES
    completion = "x" * 5_000_000
    body = json.dumps({"verifier": {"kind": "exact"}, "answer": "x", "completion": completion})
    response = api(client, verify_secret, "/api/v1/verify", body)
    assert response.status_code == 200 and response.json()["outcome"] == "fail"  # over the verifier's own cap

    settings.PASSBAND_API_MAX_BODY_BYTES = 4_000_000
    response = api(client, verify_secret, "/api/v1/verify", body)
    assert response.status_code == 400 and response["Content-Type"] == "application/json"
    assert response.json()["code"] == "too_large" and "over 4,000,000 bytes" in response.json()["detail"]


def test_every_api_error_has_the_one_json_form(client, charlie, verify_secret):
    reader = api_token_create(user=charlie, name="reader", scopes=["read"])[1]
    answers = {
        "not_authenticated": client.get("/api/v1/tasks"),
        "permission_denied": api(client, reader, "/api/v1/verify", '{"completion": "x"}'),
        "not_found": api(client, verify_secret, "/api/v1/verify", '{"task": "missing", "completion": "x"}'),
        "invalid": api(client, verify_secret, "/api/v1/verify", '{"completion": "x"}'),
        "parse_error": api(client, verify_secret, "/api/v1/verify", "{not json"),
        "method_not_allowed": client.delete("/api/v1/verify", HTTP_AUTHORIZATION=f"Bearer {verify_secret}"),
    }
    for code, response in answers.items():
        error = response.json()
        assert set(error) == {"detail", "code", "fields"} and error["code"] == code, (code, error)
        assert error["detail"] and response.status_code >= 400
    assert answers["not_found"].status_code == 404 and "missing" in answers["not_found"].json()["detail"]
