"""One input rule for the path, the query and the body (engine.input_rules, web.middleware): a NUL in a
path segment, a whole number beyond 64 bits in a query parameter or an API body, an overlong query value
and a cursor Passband never wrote are each a 400 naming where; an id beyond 64 bits in the path is a 404.
These were 500s: the NUL on PostgreSQL (a text column cannot hold it), the large id on SQLite (it cannot
bind it) and the page number on both; a 10 kB cursor was taken as the first page.

alice authors, charlie trains, sam is staff.
"""

import base64

import pytest

from accounts.services import api_token_create
from tests.factories import import_tasks, math_task

pytestmark = pytest.mark.django_db
BEYOND = "9223372036854775808"  # 2**63: one past the largest signed 64-bit number
BEYOND_64_BITS = "a whole number beyond 64 bits"


@pytest.fixture
def signed_in(client, alice, staff, arithmetic):
    import_tasks(arithmetic, alice, math_task("t"))
    staff.is_superuser = True
    staff.save()
    client.force_login(staff)
    client.raise_request_exception = False  # a 500 is an answer to assert on, not an exception
    return client


@pytest.fixture
def trainer(charlie):
    return {"HTTP_AUTHORIZATION": "Bearer " + api_token_create(user=charlie, name="t", scopes=["read", "export"])[1]}


@pytest.mark.parametrize(
    "url",
    [
        "/tasks/arithmetic/a%00b/",
        "/tasks/arithmetic/a%00b/edit/",
        "/tasks/arithmetic/t%00/comments/",
        "/environments/a%00/",
    ],
)
def test_a_nul_in_a_page_path_is_a_400_naming_the_path(signed_in, url):
    response = signed_in.get(url)
    assert response.status_code == 400
    assert "path: holds a NUL byte" in response.content.decode()


def test_a_nul_in_an_api_path_is_the_api_s_400(client, signed_in, trainer):
    response = client.get("/api/v1/tasks/arithmetic/a%00b", **trainer)
    assert response.status_code == 400
    assert response.json()["fields"] == {"path": [response.json()["fields"]["path"][0]]}
    assert "NUL" in response.json()["detail"]


@pytest.mark.parametrize(
    ("url", "field"),
    [
        (f"/api/v1/rollouts?campaign={BEYOND}", "campaign"),
        (f"/api/v1/rollouts?campaign=-{BEYOND}1", "campaign"),
        ("/api/v1/rollouts?campaign=%EF%BC%99" + "9" * 20, "campaign"),  # a fullwidth digit: int() reads it
        (f"/api/v1/tasks?environment=arithmetic&campaign={BEYOND}", "campaign"),
    ],
)
def test_a_whole_number_beyond_64_bits_in_an_api_query_is_a_400_naming_it(client, signed_in, trainer, url, field):
    response = client.get(url, **trainer)
    assert response.status_code == 400, response.content[:300]
    assert BEYOND_64_BITS in response.json()["fields"][field][0]


@pytest.mark.parametrize(
    ("url", "field"),
    [
        (f"/tasks/?page={BEYOND}", "page"),
        (f"/history/?object={BEYOND}", "object"),
        (f"/review/?position={BEYOND}", "position"),
    ],
)
def test_a_whole_number_beyond_64_bits_in_a_page_query_is_a_400_naming_it(signed_in, url, field):
    response = signed_in.get(url)
    assert response.status_code == 400
    assert f"{field}: is {BEYOND_64_BITS}" in response.content.decode()


def test_a_page_number_whose_rows_start_beyond_64_bits_is_a_404(signed_in):
    # Itself within 64 bits, but its first row's offset (page times 100) is not.
    assert signed_in.get("/tasks/?page=92233720368547759").status_code == 404
    assert signed_in.get("/history/?page=92233720368547759").status_code == 404
    assert signed_in.get("/tasks/?page=2").status_code == 200


@pytest.mark.parametrize("url", [f"/campaigns/{BEYOND}/", f"/tasks/upload/{BEYOND}/", f"/releases/{BEYOND}/diff/"])
def test_an_id_beyond_64_bits_in_a_page_path_is_a_404(signed_in, url):
    assert signed_in.get(url).status_code == 404


def test_an_id_beyond_64_bits_in_an_api_path_is_a_404(client, signed_in, trainer):
    assert client.get(f"/api/v1/releases/{BEYOND}", **trainer).status_code == 404


def test_an_overlong_query_value_is_a_400_naming_it(signed_in):
    response = signed_in.get("/tasks/", {"q": "x" * 10_000})
    assert response.status_code == 400
    assert "q: is 10,000 characters long" in response.content.decode()


@pytest.mark.parametrize(
    "cursor",
    [
        "A" * 10_000,  # 10 kB of base64 zeros: once read as the first page
        "A" * 150,
        base64.b64encode(b"p=1&x=2").decode(),  # a key Passband never writes
        base64.b64encode(b"p=1&p=2").decode(),
        base64.b64encode(f"p={BEYOND}".encode()).decode(),
        base64.b64encode(b"p=1' or 1=1").decode(),
        "not base64!",
    ],
)
def test_a_cursor_passband_did_not_write_is_a_400_naming_it(client, signed_in, trainer, cursor):
    response = client.get("/api/v1/tasks", {"cursor": cursor}, **trainer)
    assert response.status_code == 400, response.content[:300]
    assert "cursor" in response.json()["fields"]


def test_the_cursors_the_api_writes_still_page(client, signed_in, arithmetic, alice, monkeypatch):
    from api.pagination import StrictCursorPagination

    import_tasks(
        arithmetic,
        alice,
        *(math_task(f"more-{number}", f"What is {number} + 9?", str(number + 9)) for number in range(4)),
    )
    monkeypatch.setattr(StrictCursorPagination, "page_size", 2)
    owner = {"HTTP_AUTHORIZATION": "Bearer " + api_token_create(user=alice, name="t", scopes=["read"])[1]}
    seen, url = [], "/api/v1/tasks"
    while url:
        page = client.get(url, **owner).json()
        seen += [row["key"] for row in page["results"]]
        url = page["next"]
    assert sorted(seen) == sorted(["t", *(f"more-{number}" for number in range(4))])


def test_a_whole_number_beyond_64_bits_in_an_api_body_is_a_400_naming_where(client, signed_in, alice, arithmetic):
    secret = api_token_create(user=alice, name="c", scopes=["read", "curate"])[1]
    body = '{"environment": "arithmetic", "key": "t", "body": "hello", "parent": %s}' % BEYOND
    response = client.post(
        "/api/v1/comments", body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {secret}"
    )
    assert response.status_code == 400
    assert BEYOND_64_BITS in response.json()["fields"]["parent"][0]
    body = '{"ids": [1, %s]}' % BEYOND
    response = client.post(
        "/api/v1/notifications/read", body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {secret}"
    )
    assert response.status_code == 400
    assert BEYOND_64_BITS in response.json()["fields"]["ids"][0]
