"""Every route has a declared policy, and each answers by it: walk Django's URL resolver, so a route
added without an entry in curation.routes fails here.

Named users: alice authors the tasks, dora is another author, bob reviews, charlie trains (API
only), trinity is another trainer, sam is staff. A route's gate refuses a signed-out caller (to the
login page, or 401 from the API) and a caller without its role (403); a route with an object in
its URL answers 404 to whoever may not see the object and 403 to whoever sees it but may not act.
"""

import types
from unittest import mock

import pytest
from django.test import override_settings
from django.urls import URLPattern, URLResolver, get_resolver, path, reverse

from accounts.services import api_token_create
from calibration.models import Campaign, ProbeModel, Reprofile
from curation import routes
from curation.models import Comment, ImportJob, McpServer, Task, TaskStatus
from curation.services import task_transition
from releases.models import Release
from review.models import BlindItem
from tests.conftest import make_user
from tests.factories import import_tasks, judge_task, math_task

pytestmark = pytest.mark.django_db


def walk(patterns, prefix: str = "", namespace: str = ""):
    """(full URL name or None, namespace, route text, callback) of every route under `patterns`."""
    for entry in patterns:
        if isinstance(entry, URLResolver):
            inner = ":".join(part for part in (namespace, entry.namespace) if part)
            yield from walk(entry.url_patterns, prefix + str(entry.pattern), inner)
        elif isinstance(entry, URLPattern):
            yield entry.name, namespace, prefix + str(entry.pattern), entry.callback


def undeclared(patterns) -> list[str]:
    """Routes that neither the route table nor a covered namespace declares, or whose view of ours
    does not take its gate from the table."""
    problems = []
    for name, namespace, route, callback in walk(patterns):
        if namespace.split(":")[0] in routes.NAMESPACES:
            continue
        if name not in routes.ROUTES:
            problems.append(f"{route!r} (name {name!r}) has no entry in curation.routes.ROUTES")
            continue
        view = getattr(callback, "view_class", None) or getattr(callback, "cls", None) or callback
        if view.__module__.startswith(("web.", "api.")) and getattr(view, "policy_route", None) != name:
            problems.append(f"{route!r}: the view {view.__qualname__} does not use policy.page/api({name!r})")
    return problems


def test_every_route_is_declared_and_its_view_uses_the_policy():
    patterns = get_resolver().url_patterns
    assert undeclared(patterns) == []
    names = {name for name, *_ in walk(patterns)}
    assert set(routes.ROUTES) - names == set(), "entries for routes that no longer exist"


def test_a_new_route_without_a_policy_fails():
    urlconf = types.ModuleType("passband_test_urls")
    urlconf.urlpatterns = [*get_resolver().url_patterns, path("new/", lambda request: None, name="new_page")]
    with override_settings(ROOT_URLCONF=urlconf):
        assert undeclared(get_resolver(urlconf).url_patterns) == [
            "'new/' (name 'new_page') has no entry in curation.routes.ROUTES"
        ]


# Users and objects --------------------------------------------------------------------------------


@pytest.fixture
def users(alice, bob, charlie, staff, django_user_model):
    return {
        "alice": alice,
        "bob": bob,
        "charlie": charlie,
        "staff": staff,
        "dora": make_user(django_user_model, "dora", "authors"),
        "trinity": make_user(django_user_model, "trinity", "trainers"),
        "lena": make_user(django_user_model, "lena", "leads"),
    }


TOKEN_SCOPES = {
    "alice": ["read", "curate"],
    "bob": ["read", "verify", "curate"],
    "charlie": ["read", "export", "verify", "feedback"],
    "trinity": ["read", "export"],
    "dora": ["read", "curate"],
    "lena": ["read", "verify", "curate"],
    "staff": ["read", "export", "verify", "feedback", "curate"],
}


@pytest.fixture
def tokens(users):
    return {
        name: api_token_create(user=users[name], name="t", scopes=scopes)[1] for name, scopes in TOKEN_SCOPES.items()
    }


@pytest.fixture
def world(users, arithmetic):
    """alice's draft (t-1), her approved task (pub), a submitted task of her own and one of bob's."""
    alice, bob = users["alice"], users["bob"]
    import_tasks(arithmetic, alice, math_task("t-1"), math_task("pub", "What is 1 + 1?", "2"))
    import_tasks(arithmetic, alice, math_task("sub", "What is 2 + 2?", "4"))
    import_tasks(arithmetic, bob, math_task("bobs", "What is 3 + 3?", "6"))
    Task.objects.filter(key="pub").update(status=TaskStatus.APPROVED)
    for key, owner in (("sub", alice), ("bobs", bob)):
        task_transition(task=Task.objects.get(key=key), to_status=TaskStatus.SUBMITTED, by=owner)
    probe_model = ProbeModel.objects.create(name="probe", backend="openai", base_url="http://127.0.0.1:9/v1")
    blind_items = {
        name: BlindItem.objects.create(
            kind=BlindItem.Kind.JUDGED_ROLLOUT,
            object_id=index,
            task_version=judge_task(arithmetic, owner, f"judged-{name}").current_version,
            content="5",
            decided_by="grader",
            decision="pass",
        )
        for index, (name, owner) in enumerate((("blind_item", alice), ("bobs_blind_item", bob)))
    }
    McpServer.objects.create(name="kv", url="http://127.0.0.1:9/mcp", timeout_s=5)
    return {
        **blind_items,
        "draft_comment": Comment.objects.create(task=Task.objects.get(key="t-1"), author=bob, body="wording"),
        "public_comment": Comment.objects.create(task=Task.objects.get(key="pub"), author=bob, body="wording"),
        "campaign": Campaign.objects.create(environment=arithmetic, probe_model=probe_model, created_by=alice, seed=1),
        "import_job": ImportJob.objects.create(
            environment=arithmetic, owner=alice, filename="x.jsonl", path="x", size_bytes=1, status="done"
        ),
        "release": Release.objects.create(created_by=users["charlie"], probe_model=probe_model),
        "reprofile": Reprofile.objects.create(environment=arithmetic, probe_model=probe_model, created_by=alice),
    }


def answer(client, users, tokens, who: str, method: str, url: str, data: dict) -> int:
    api = url.startswith("/api/")
    headers = {"HTTP_AUTHORIZATION": f"Bearer {tokens[who]}"} if api and who != "anonymous" else {}
    if not api and who != "anonymous":
        client.force_login(users[who])
    call = client.post if method == "POST" else client.get
    with mock.patch("calibration.services.campaigns.campaign_enqueue_pending"):
        response = call(url, data, content_type="application/json", **headers) if api else call(url, data)
    client.logout()
    if response.status_code == 302 and response["Location"].startswith("/login/"):
        return "login"
    return response.status_code


# Routes without an object: the gate alone --------------------------------------------------------

# For each gate: who lacks it (403), besides a signed-out caller.
REFUSED_BY_GATE = {
    routes.BROWSER: "charlie",
    routes.AUTHORS: "bob",
    routes.REVIEWERS: "alice",
    routes.CURATORS: "charlie",
    routes.STAFF: "alice",
    routes.TRAINERS: "bob",
    routes.SIGNED_IN: None,
    routes.API + "read": None,
    routes.API + "export": "alice",
    routes.API + "verify": "alice",
    routes.API + "feedback": "bob",
    routes.API + "curate": "charlie",
}
GATED = sorted(name for name, route in routes.ROUTES.items() if route.gate in REFUSED_BY_GATE and route.kind is None)


@pytest.mark.parametrize("name", GATED)
def test_the_gate_refuses_the_signed_out_and_the_wrong_role(client, users, tokens, world, name):
    declared = routes.ROUTES[name]
    url = "/" + next(route for route_name, _, route, _ in walk(get_resolver().url_patterns) if route_name == name)
    method = declared.methods[0]
    api = declared.gate.startswith(routes.API)
    assert answer(client, users, tokens, "anonymous", method, url, {}) == (401 if api else "login")
    refused = REFUSED_BY_GATE[declared.gate]
    if refused is not None:
        assert answer(client, users, tokens, refused, method, url, {}) == 403


# Routes with an object: anonymous, the wrong user and the right one -------------------------------

TASK = {"environment_name": "arithmetic", "key": "t-1"}
PUBLIC_TASK = {"environment_name": "arithmetic", "key": "pub"}
MISSING_TASK = {"environment_name": "arithmetic", "key": "nope"}
EDIT = {"prompt_format": "text", "prompt": "What is 4 + 4?", "answer": "8", "verifier": '{"kind": "math"}'}

# name -> [(URL kwargs, POST data, {user: answer})]; kwargs may name an object of `world`.
CASES = {
    "task_detail": [
        (TASK, {}, {"anonymous": "login", "dora": 404, "charlie": 403, "alice": 200, "bob": 200, "staff": 200}),
        (PUBLIC_TASK, {}, {"dora": 200}),
        (MISSING_TASK, {}, {"staff": 404}),
    ],
    "task_edit": [
        (TASK, {}, {"anonymous": "login", "dora": 404, "bob": 403, "alice": 200, "staff": 200}),
        (PUBLIC_TASK, {}, {"dora": 403}),
    ],
    "task_submit": [
        (TASK, {}, {"anonymous": "login", "dora": 404, "bob": 403, "alice": 302}),
        (PUBLIC_TASK, {}, {"dora": 403}),
        (MISSING_TASK, {}, {"alice": 404}),
    ],
    "task_probe": [
        (TASK, {"model": "probe"}, {"anonymous": "login", "dora": 404, "bob": 403, "alice": 302}),
        (PUBLIC_TASK, {"model": "probe"}, {"dora": 403}),
    ],
    "comment_create": [
        (TASK, {"body": "hi"}, {"anonymous": "login", "dora": 404, "charlie": 403, "alice": 302, "bob": 302}),
        (PUBLIC_TASK, {"body": "hi"}, {"dora": 403}),
    ],
    "comment_resolve": [
        ({"comment_id": "draft_comment"}, {}, {"anonymous": "login", "dora": 404, "alice": 302, "bob": 302}),
        ({"comment_id": "public_comment"}, {}, {"dora": 403}),
        ({"comment_id": 999999}, {}, {"staff": 404}),
    ],
    "review_action": [
        ({**TASK, "key": "sub", "action": "claim"}, {}, {"anonymous": "login", "alice": 403, "dora": 403, "bob": 302}),
        ({**TASK, "key": "bobs", "action": "claim"}, {}, {"bob": 403, "staff": 302}),
        ({**MISSING_TASK, "action": "claim"}, {}, {"bob": 404}),
    ],
    "blind_review": [
        ({"item_id": "blind_item"}, {}, {"anonymous": "login", "alice": 403, "charlie": 403, "bob": 200, "staff": 200}),
        ({"item_id": "bobs_blind_item"}, {}, {"bob": 403, "staff": 200}),
        ({"item_id": 999999}, {}, {"bob": 404}),
    ],
    "adjudication_decide": [
        ({"item_id": "blind_item"}, {"verdict": "pass"}, {"anonymous": "login", "alice": 403, "bob": 403}),
        ({"item_id": "blind_item"}, {"verdict": "pass"}, {"lena": 302, "staff": 302}),
        ({"item_id": 999999}, {"verdict": "pass"}, {"lena": 404}),
    ],
    "gold_add": [
        ({**TASK, "key": "sub"}, {"decision": "approve"}, {"anonymous": "login", "alice": 403, "bob": 403}),
        ({**TASK, "key": "sub"}, {"decision": "approve"}, {"lena": 302, "staff": 302}),
        ({**MISSING_TASK}, {"decision": "approve"}, {"lena": 404}),
    ],
    "review_fix": [
        ({**TASK, "key": "sub"}, {"defect": "other"}, {"anonymous": "login", "alice": 403, "dora": 403, "bob": 302}),
        ({**TASK, "key": "bobs"}, {"defect": "other"}, {"bob": 403}),
        ({**MISSING_TASK}, {"defect": "other"}, {"bob": 404}),
    ],
    "review_reprobe": [
        ({**TASK, "key": "sub"}, {"model": "probe"}, {"anonymous": "login", "alice": 403, "bob": 302}),
        ({**TASK, "key": "bobs"}, {"model": "probe"}, {"bob": 403}),
        ({**MISSING_TASK}, {"model": "probe"}, {"bob": 404}),
    ],
    "import_job_detail": [
        ({"job_id": "import_job"}, {}, {"anonymous": "login", "dora": 404, "bob": 403, "alice": 200, "staff": 200}),
    ],
    "import_job_map": [
        ({"job_id": "import_job"}, {}, {"anonymous": "login", "dora": 404, "bob": 403, "alice": 302}),
    ],
    "environment_detail": [
        ({"environment_name": "arithmetic"}, {}, {"anonymous": "login", "charlie": 403, "dora": 200, "alice": 200}),
        ({"environment_name": "nope"}, {}, {"alice": 404}),
    ],
    "environment_edit": [
        ({"environment_name": "arithmetic"}, {}, {"anonymous": "login", "alice": 403, "bob": 200}),
        ({"environment_name": "nope"}, {}, {"bob": 404}),
    ],
    "environment_probe": [
        ({"environment_name": "arithmetic"}, {"model": "probe"}, {"anonymous": "login", "bob": 403, "alice": 200}),
        ({"environment_name": "nope"}, {"model": "probe"}, {"alice": 404}),
    ],
    "environment_impossible_variants": [
        # Staff probe the environment's variants; a task's author (or staff) probes that task's alone.
        ({"environment_name": "arithmetic"}, {"model": "probe"}, {"anonymous": "login", "charlie": 403, "bob": 403}),
        ({"environment_name": "arithmetic"}, {"model": "probe"}, {"alice": 403, "staff": 302}),
        ({"environment_name": "arithmetic"}, {"model": "probe", "task": "t-1"}, {"bob": 403, "alice": 302}),
        ({"environment_name": "nope"}, {"model": "probe"}, {"staff": 404}),
    ],
    "checkpoint_reprofile": [
        # "probe" is no checkpoint of a run: refused with a message on the dashboard, nothing started.
        ({"environment_name": "arithmetic"}, {"model": "probe"}, {"anonymous": "login", "bob": 403, "alice": 302}),
        ({"environment_name": "nope"}, {"model": "probe"}, {"alice": 404}),
    ],
    "environment_costs_data": [
        ({"environment_name": "arithmetic"}, {}, {"anonymous": "login", "charlie": 403, "alice": 200}),
        ({"environment_name": "nope"}, {}, {"alice": 404}),
    ],
    "campaign_detail": [
        ({"campaign_id": "campaign"}, {}, {"anonymous": "login", "charlie": 403, "dora": 200, "alice": 200}),
        ({"campaign_id": 999999}, {}, {"alice": 404}),
    ],
    "campaign_control": [
        ({"campaign_id": "campaign", "action": "pause"}, {}, {"anonymous": "login", "bob": 403, "dora": 403}),
        ({"campaign_id": "campaign", "action": "pause"}, {}, {"alice": 302}),
        ({"campaign_id": 999999, "action": "pause"}, {}, {"alice": 404}),
    ],
    "campaign_traces": [
        ({"campaign_id": "campaign", "file_type": "jsonl"}, {}, {"anonymous": "login", "alice": 403, "bob": 403}),
        ({"campaign_id": "campaign", "file_type": "jsonl"}, {}, {"charlie": 200, "staff": 200}),
        ({"campaign_id": 999999, "file_type": "jsonl"}, {}, {"charlie": 404}),
    ],
    "mcp_server_check": [
        ({"name": "kv"}, {}, {"anonymous": "login", "alice": 403, "bob": 403, "staff": 302}),
        ({"name": "nope"}, {}, {"staff": 404}),
    ],
    "mcp_server_schema_accept": [
        ({"name": "kv"}, {}, {"anonymous": "login", "alice": 403, "bob": 403, "staff": 302}),
        ({"name": "nope"}, {}, {"staff": 404}),
    ],
    "mcp_server_use": [
        ({"name": "kv"}, {"environment": "arithmetic"}, {"anonymous": "login", "alice": 403, "staff": 302}),
        ({"name": "nope"}, {"environment": "arithmetic"}, {"staff": 404}),
        ({"name": "kv"}, {"environment": "nope"}, {"staff": 404}),
    ],
    "probe_model_edit": [
        ({"name": "probe"}, {"max_new_tokens": "64"}, {"anonymous": "login", "alice": 403, "staff": 302}),
        ({"name": "nope"}, {"max_new_tokens": "64"}, {"staff": 404}),
    ],
    "token_revoke": [
        ({"token_id": "alice_token"}, {}, {"anonymous": "login", "dora": 404, "staff": 404, "alice": 302}),
    ],
    "release_file": [
        ({"release_id": "release", "file_name": "trl.jsonl"}, {}, {"anonymous": "login", "alice": 403, "bob": 403}),
        ({"release_id": "release", "file_name": "trl.jsonl"}, {}, {"charlie": 302, "trinity": 302}),
        ({"release_id": 999999, "file_name": "trl.jsonl"}, {}, {"charlie": 404}),
    ],
    "api_release_detail": [
        ({"release_id": "release"}, {}, {"anonymous": 401, "alice": 403, "trinity": 200, "charlie": 200}),
        ({"release_id": 999999}, {}, {"charlie": 404}),
    ],
    "release_diff": [
        ({"release_id": "release"}, {}, {"anonymous": "login", "alice": 403, "bob": 403, "charlie": 400}),
        ({"release_id": 999999}, {}, {"charlie": 404}),
    ],
    "api_release_diff": [
        ({"release_id": "release"}, {}, {"anonymous": 401, "alice": 403, "charlie": 400}),
        ({"release_id": 999999}, {}, {"charlie": 404}),
    ],
    "api_task_comments": [
        (TASK, {}, {"anonymous": 401, "dora": 404, "charlie": 404, "alice": 200, "bob": 200}),
        (MISSING_TASK, {}, {"alice": 404}),
    ],
    "api_quality_card": [
        ({**TASK, "number": 1}, {}, {"anonymous": 401, "dora": 404, "charlie": 404, "alice": 200, "bob": 200}),
        ({**TASK, "number": 7}, {}, {"alice": 404}),
        ({**MISSING_TASK, "number": 1}, {}, {"alice": 404}),
    ],
    "api_environment_impossible_variants": [
        ({"environment_name": "arithmetic"}, {}, {"anonymous": 401, "charlie": 200, "alice": 200}),
        ({"environment_name": "nope"}, {}, {"alice": 404}),
    ],
    "api_reprofile_detail": [
        ({"reprofile_id": "reprofile"}, {}, {"anonymous": 401, "charlie": 403, "alice": 200, "bob": 200}),
        ({"reprofile_id": 999999}, {}, {"alice": 404}),
    ],
    "api_release_retry": [
        ({"release_id": "release"}, {}, {"anonymous": 401, "alice": 403, "charlie": 409}),
        ({"release_id": 999999}, {}, {"charlie": 404}),
    ],
    "api_campaign_detail": [
        ({"campaign_id": "campaign"}, {}, {"anonymous": 401, "charlie": 200, "dora": 200, "alice": 200}),
        ({"campaign_id": 999999}, {}, {"alice": 404}),
    ],
    "api_campaign_traces": [
        ({"campaign_id": "campaign", "file_type": "jsonl"}, {}, {"anonymous": 401, "alice": 403, "charlie": 200}),
        ({"campaign_id": 999999, "file_type": "jsonl"}, {}, {"charlie": 404}),
    ],
    "api_release_file": [
        ({"release_id": "release", "export_format": "trl", "file_type": "jsonl"}, {}, {"anonymous": 401, "alice": 403}),
        ({"release_id": "release", "export_format": "trl", "file_type": "jsonl"}, {}, {"charlie": 409}),
        ({"release_id": 999999, "export_format": "trl", "file_type": "jsonl"}, {}, {"charlie": 404}),
    ],
}
WITH_OBJECT = sorted(name for name, route in routes.ROUTES.items() if route.kind is not None)


def test_every_route_with_an_object_has_its_cases():
    assert sorted(CASES) == WITH_OBJECT


@pytest.mark.parametrize("name", WITH_OBJECT)
def test_routes_with_an_object_answer_by_the_policy(client, users, tokens, world, name):
    world = {**world, "alice_token": users["alice"].api_tokens.get()}
    method = routes.ROUTES[name].methods[-1] if routes.ROUTES[name].methods != ("GET", "POST") else "GET"
    for kwargs, data, expected in CASES[name]:
        kwargs = {key: world[value].pk if value in world else value for key, value in kwargs.items()}
        url = reverse(name, kwargs=kwargs)
        answers = {who: answer(client, users, tokens, who, method, url, data) for who in expected}
        assert answers == expected, url


def test_the_campaign_page_offers_its_controls_only_to_who_may_use_them(client, users, world):
    url = reverse("campaign_detail", args=[world["campaign"].pk])
    for who, shown in (("alice", True), ("staff", True), ("dora", False), ("bob", False)):
        client.force_login(users[who])
        assert ('id="campaign-actions"' in client.get(url).content.decode()) is shown, who
