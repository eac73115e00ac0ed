"""Locust users for bench/loadtest/run.py: trainers on the API and reviewers on the pages.

Reads PASSBAND_LOAD_TOKENS (the trainer's API tokens with read, feedback and export scopes, comma-separated:
one per trainer script, as each script's rate limit is its token's),
PASSBAND_LOAD_ENVIRONMENT, PASSBAND_LOAD_RELEASE (a built release id), PASSBAND_LOAD_TASKS (task keys,
comma-separated), PASSBAND_LOAD_REVIEWER ("username:password") and PASSBAND_LOAD_WARM_UP (seconds of
load before the statistics start: they are reset then).
"""

import itertools
import os
import random

import gevent
from locust import HttpUser, between, events, task

TOKENS = os.environ.get("PASSBAND_LOAD_TOKENS", "").split(",")
ENVIRONMENT = os.environ.get("PASSBAND_LOAD_ENVIRONMENT", "load")
RELEASE = os.environ.get("PASSBAND_LOAD_RELEASE", "1")
TASKS = os.environ.get("PASSBAND_LOAD_TASKS", "t-0").split(",")
REVIEWER = os.environ.get("PASSBAND_LOAD_REVIEWER", "reviewer:reviewer")
WARM_UP = float(os.environ.get("PASSBAND_LOAD_WARM_UP", "0"))


@events.test_start.add_listener
def count_after_warm_up(environment, **kwargs):
    if WARM_UP > 0:
        gevent.spawn_later(WARM_UP, environment.runner.stats.reset_all)


class Trainer(HttpUser):
    """Pages through tasks, reports pass rates, downloads the release."""

    weight = 4
    wait_time = between(0.5, 1.5)

    started = itertools.count()

    def on_start(self):
        self.client.headers["Authorization"] = f"Bearer {TOKENS[next(Trainer.started) % len(TOKENS)]}"

    @task(6)
    def page_tasks(self):
        url = f"/api/v1/tasks?environment={ENVIRONMENT}"
        for _ in range(3):  # the first pages of the cursor
            response = self.client.get(url, name="GET /api/v1/tasks (a page)")
            if response.status_code != 200:
                return
            url = response.json().get("next")
            if not url:
                return

    @task(3)
    def post_feedback(self):
        key = random.choice(TASKS)
        self.client.post(
            "/api/v1/feedback",
            json={
                "task": key,
                "environment": ENVIRONMENT,
                "checkpoint": f"ckpt-{random.randint(1, 5)}",
                "step": random.randint(1, 5) * 100,
                "attempts": 16,
                "passes": random.randint(0, 16),
            },
            name="POST /api/v1/feedback",
        )

    @task(1)
    def download_release(self):
        self.client.get(f"/api/v1/releases/{RELEASE}/files/native.jsonl", name="GET release native.jsonl")


class Reviewer(HttpUser):
    """Signs in and reads the pages a reviewer reads while a campaign runs: the task list, task pages, the
    dashboard and the review queue."""

    weight = 1
    wait_time = between(1, 3)

    def on_start(self):
        username, password = REVIEWER.split(":", 1)
        self.client.get("/login/", name="GET /login/")
        self.client.post(
            "/login/",
            data={
                "username": username,
                "password": password,
                "csrfmiddlewaretoken": self.client.cookies.get("csrftoken", ""),
            },
            headers={"Referer": self.host + "/login/"},
            name="POST /login/",
        )

    @task(3)
    def task_list(self):
        self.client.get(f"/tasks/?environment={ENVIRONMENT}", name="GET /tasks/")

    @task(2)
    def task_page(self):
        self.client.get(f"/tasks/{ENVIRONMENT}/{random.choice(TASKS)}/", name="GET /tasks/<environment>/<key>/")

    @task(2)
    def dashboard(self):
        self.client.get("/dashboard/", name="GET /dashboard/")
        self.client.get("/dashboard/campaigns.json", name="GET /dashboard/campaigns.json")

    @task(1)
    def review_queue(self):
        self.client.get("/review/", name="GET /review/")
