"""GET /api/v1/curriculum: a scripted trainer loop sees the in-band pool move as its pass rates rise."""

import numpy as np
import pytest

from accounts.services import api_token_create
from calibration.models import Calibration, ProbeModel
from curation.models import Task, TaskStatus
from tests.factories import import_tasks, math_task

pytestmark = pytest.mark.django_db

HARD = [f"hard-{index}" for index in range(4)]
MEDIUM = [f"medium-{index}" for index in range(4)]
EASY = [f"easy-{index}" for index in range(4)]


@pytest.fixture
def pool(arithmetic, alice):
    """Twelve approved tasks calibrated under `probe`: four never pass, four pass a quarter, four nearly always."""
    keys = HARD + MEDIUM + EASY
    import_tasks(
        arithmetic,
        alice,
        *[math_task(key, question=f"What is {index} + 7?", answer=str(index + 7)) for index, key in enumerate(keys)],
    )
    Task.objects.filter(environment=arithmetic).update(status=TaskStatus.APPROVED)
    model = ProbeModel.objects.create(name="probe", backend="transformers", model="tiny")
    for key in keys:
        successes, attempts = {"hard": (0, 72), "medium": (8, 32), "easy": (31, 32)}[key.split("-")[0]]
        Calibration.objects.create(
            task_version=arithmetic.tasks.get(key=key).current_version,
            probe_model=model,
            attempts=attempts,
            successes=successes,
            band="in_band",
            decided=True,
        )
    return model


@pytest.fixture
def secret(charlie):
    return api_token_create(user=charlie, name="trainer", scopes=["read", "feedback"])[1]


def curriculum(client, secret, **params):
    response = client.get(
        "/api/v1/curriculum",
        {"environment": "arithmetic", "model": "probe", **params},
        HTTP_AUTHORIZATION=f"Bearer {secret}",
    )
    assert response.status_code == 200, response.content
    return response.json()


def true_pass_rate(key: str, step: int) -> float:
    """The policy improves: hard tasks start to be solved, medium ones are mastered."""
    kind = key.split("-")[0]
    return {"hard": min(0.5, 0.1 * step), "medium": min(0.97, 0.25 + 0.18 * step), "easy": 0.98}[kind]


def test_a_trainer_loop_sees_the_in_band_tasks_shift_as_pass_rates_rise(client, secret, pool):
    rng = np.random.default_rng(0)
    first = curriculum(client, secret, n=4, step=0, seed=0)
    assert first["candidates"] == 12 and first["pool"]["in_band"] == 4
    assert sum(task["task"] in MEDIUM for task in first["tasks"]) >= 3  # the learning signal is there
    drawn_by_step = []
    for step in range(8):
        body = curriculum(client, secret, n=6, step=step, seed=step)
        drawn_by_step.append([task["task"] for task in body["tasks"]])
        reports = []
        for task in body["tasks"]:
            passes = int(rng.binomial(16, true_pass_rate(task["task"], step)))
            reports.append(
                {"task": task["task"], "checkpoint": f"ckpt-{step}", "step": step, "attempts": 16, "passes": passes}
            )
        response = client.post(
            "/api/v1/feedback", reports, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {secret}"
        )
        assert response.status_code == 201, response.content
    last = curriculum(client, secret, n=4, step=7, seed=99)
    # Medium tasks were mastered: retired by feedback or predicted retire, no longer drawn first.
    assert sum(task["task"] in MEDIUM for task in last["tasks"]) <= 1
    assert sum(task["task"] in HARD for task in last["tasks"]) >= 2
    in_band_now = {task["task"] for task in last["tasks"] if task["band"] == "in_band"}
    assert in_band_now & set(HARD)
    assert sum(key in HARD for key in drawn_by_step[-1]) > sum(key in HARD for key in drawn_by_step[0])
    # The same question is answered the same way: a checkpoint's draw is reproducible from its seed.
    assert curriculum(client, secret, n=6, step=3, seed=3) == curriculum(client, secret, n=6, step=3, seed=3)


def test_the_draw_is_reproducible_and_follows_the_checkpoint(client, secret, pool):
    one = curriculum(client, secret, n=5, seed=7)
    assert one == curriculum(client, secret, n=5, seed=7)
    assert [task["task"] for task in one["tasks"]] != [] and one["step"] is None


def test_bad_queries_name_the_parameter(client, secret, pool):
    for params, field in (({"n": 0}, "n"), ({"seed": "x"}, "seed"), ({"environment": ""}, "environment")):
        response = client.get(
            "/api/v1/curriculum",
            {"environment": "arithmetic", **params},
            HTTP_AUTHORIZATION=f"Bearer {secret}",
        )
        assert response.status_code == 400 and field in response.json()["fields"], response.content
    response = client.get("/api/v1/curriculum", {"environment": "nowhere"}, HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert response.status_code == 404


def test_a_token_without_the_read_scope_is_refused(client, charlie, pool):
    feedback_only = api_token_create(user=charlie, name="feedback only", scopes=["feedback"])[1]
    response = client.get(
        "/api/v1/curriculum", {"environment": "arithmetic"}, HTTP_AUTHORIZATION=f"Bearer {feedback_only}"
    )
    assert response.status_code == 403


def test_the_curriculum_is_in_the_schema(client):
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json").content.decode()
    assert "/api/v1/curriculum" in schema and "group_size" in schema


def test_the_forecast_says_when_the_in_band_pool_runs_out(client, secret, pool):
    """Only the medium tasks are in band, and the policy masters them: the pool shrinks step by
    step, and the forecast puts its end ahead of the last checkpoint."""
    rng = np.random.default_rng(1)
    assert curriculum(client, secret, n=1)["forecast"] == {"in_band_by_step": [], "slope": None, "empty_at_step": None}
    for step in range(0, 400, 100):
        rate = {"hard": 0.0, "medium": 0.2 + step / 1000, "easy": 0.98}
        reports = [
            {
                "task": key,
                "checkpoint": f"ckpt-{step}",
                "step": step,
                "attempts": 32,
                "passes": int(rng.binomial(32, rate[key.split("-")[0]])),
            }
            for key in MEDIUM
        ]
        client.post("/api/v1/feedback", reports, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {secret}")
    for step in range(400, 700, 100):
        reports = [
            {"task": key, "checkpoint": f"ckpt-{step}", "step": step, "attempts": 32, "passes": 31} for key in MEDIUM
        ]
        client.post("/api/v1/feedback", reports, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {secret}")
    # The draw for step 600 comes before step 600's feedback: the forecast reads steps up to 500.
    forecast = curriculum(client, secret, n=1, step=600)["forecast"]
    steps = [step for step, _ in forecast["in_band_by_step"]]
    counts = [count for _, count in forecast["in_band_by_step"]]
    assert steps == [100, 200, 300, 400, 500] and counts[0] == 4 and counts[-1] < counts[0]
    assert forecast["slope"] < 0 and forecast["empty_at_step"] >= 500
    # Feedback up to step 200 only: the pool was not shrinking yet.
    early = curriculum(client, secret, n=1, step=300)["forecast"]
    assert early["empty_at_step"] is None


def test_a_step_replays_exactly_after_later_feedback_retires_tasks(client, secret, pool):
    """A trainer resuming from a checkpoint asks for the same step and seed again: the same draw, though
    feedback since (at that step and after) retired tasks it had drawn. Later steps see the retirement."""

    def report(step: int, passes: int):
        body = [
            {"task": key, "checkpoint": f"ckpt-{step}", "step": step, "attempts": 64, "passes": passes}
            for key in MEDIUM
        ]
        response = client.post(
            "/api/v1/feedback", body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {secret}"
        )
        assert response.status_code == 201, response.content

    report(0, 16)
    before = curriculum(client, secret, n=6, step=1, seed=5)
    assert before["candidates"] == 12 and {task["task"] for task in before["tasks"]} & set(MEDIUM)
    report(1, 64)  # step 1's feedback: the medium tasks are mastered and retired
    report(2, 64)
    assert set(Task.objects.filter(key__in=MEDIUM).values_list("status", flat=True)) == {TaskStatus.RETIRED}
    assert curriculum(client, secret, n=6, step=1, seed=5) == before
    after = curriculum(client, secret, n=6, step=2, seed=5)
    assert after["candidates"] == 8 and not {task["task"] for task in after["tasks"]} & set(MEDIUM)
