"""Small things a new user met: verifiers shown as JSON, a favicon, no inline handler (the CSP blocks them), the
per-task Probe defaults match the environment's, and `make run` starts beat."""

import re
from pathlib import Path

import pytest
from django.urls import reverse

from calibration.models import ProbeModel
from tests.factories import import_tasks, math_task

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]


def test_verifiers_show_as_json_not_python(client, alice, bob, arithmetic):
    import_tasks(arithmetic, alice, math_task("t", verifier={"kind": "math", "strict": True}))
    client.force_login(alice)
    page = client.get(reverse("task_detail", args=["arithmetic", "t"])).content.decode()
    assert (
        "&quot;kind&quot;: &quot;math&quot;" in page
        and "&quot;strict&quot;: true" in page
        and "&#x27;kind&#x27;" not in page
    )


def test_favicon_is_linked_and_served(client, alice):
    client.force_login(alice)
    assert 'rel="icon"' in client.get(reverse("environment_list")).content.decode()
    response = client.get("/favicon.ico")
    assert response.status_code == 301 and response.url.endswith("web/favicon.svg")


def test_no_template_carries_an_inline_handler():
    """The CSP (script-src 'self') blocks inline handlers: a button asks through data-confirm instead."""
    templates = ROOT / "templates"
    inline = re.compile(r"\son[a-z]+\s*=|javascript:", re.IGNORECASE)
    offenders = [
        f"{path.relative_to(templates)}:{number}"
        for path in templates.rglob("*.html")
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if inline.search(line)
    ]
    assert offenders == []


def test_per_task_probe_defaults_match_the_environments(client, alice, arithmetic):
    import_tasks(arithmetic, alice, math_task("t"))
    ProbeModel.objects.create(name="probe", backend="openai", base_url="http://127.0.0.1:9/v1")
    client.force_login(alice)
    task_page = client.get(reverse("task_detail", args=["arithmetic", "t"])).content.decode()
    environment_page = client.get(reverse("environment_list")).content.decode()
    for page in (task_page, environment_page):
        assert '<option value="fixed">fixed N</option><option value="adaptive">adaptive</option>' in page
        assert 'name="rollouts" type="number" min="1" max="1024" value="8"' in page


def test_make_run_starts_beat_and_stops_workers_without_hanging():
    script = (ROOT / "scripts" / "run-local.sh").read_text()
    assert "celery -A passband beat" in script and "kill -QUIT" in script
    # Workers in sessions of their own: Ctrl-C never reaches their pool processes directly.
    # Each under the runner's supervisor, which starts it in a session of its own and again when it exits.
    assert 'setsid "$@" &' in script
    assert (
        script.count('\nsupervise "') == script.count("-m celery -A passband") == 4
    )  # generate, cpu, similarity, beat
