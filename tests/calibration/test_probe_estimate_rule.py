"""An adaptive probe's estimate counts the rollouts the stopping rule is expected to use, not the cap, and says so."""

import re

import pytest

from calibration import selectors, services
from calibration.models import Rollout
from curation.models import Task
from tests.factories import import_tasks
from tests.support.openai_server import serve_openai

pytestmark = pytest.mark.django_db

TASKS = 6


def _right_for_the_first_three(prompt: str, seed: int) -> str:
    """Tasks 0-2 answered right every time, 3-5 never: the rule decides each of them early."""
    found = re.search(r"What is (\d+) \+ 42", prompt)
    task = int(found[1]) if found else TASKS
    return str(task + 42) if task < 3 else "no idea"


def _estimate(model, arithmetic, **options) -> dict:
    versions = list(Task.objects.filter(environment=arithmetic).values_list("current_version", flat=True))
    return selectors.probe_estimate(
        probe_model=model, tasks=len(versions), rollouts=16, max_new_tokens=model.max_new_tokens,
        environment=arithmetic, task_versions=versions, round_size=4, **options,
    )  # fmt: skip


def test_an_adaptive_estimate_counts_the_rollouts_the_rule_is_expected_to_use(arithmetic, alice):
    import_tasks(
        arithmetic,
        alice,
        *[
            {"key": f"t{i}", "prompt": f"What is {i} + 42?", "answer": str(i + 42), "verifier": {"kind": "exact"}}
            for i in range(TASKS)
        ],
    )
    with serve_openai(respond=_right_for_the_first_three) as base_url:
        model = services.probe_model_add(
            name="rule", backend="openai", base_url=base_url, model="fake-model", usd_per_million_output_tokens=10
        )
        first = _estimate(model, arithmetic, policy="adaptive")
        to_the_cap = _estimate(model, arithmetic, policy="fixed")
        # No attempts yet: the rule's expectation for an unknown pass rate, between one round per task and the cap.
        assert first["rollouts"] == to_the_cap["rollouts"] == TASKS * 16
        assert TASKS * 4 < first["expected_rollouts"] < TASKS * 16
        assert "no attempts yet" in first["basis"] and "Jeffreys" in first["basis"] and not first["measured"]
        assert first["cost_usd"] < to_the_cap["cost_usd"]
        # The range runs from every task stopped after its first round to every task at the cap.
        assert first["seconds_range"][0] == pytest.approx(to_the_cap["seconds_range"][0] * 4 / 16)
        assert first["seconds_range"][1] == pytest.approx(to_the_cap["seconds_range"][1])
        for _ in range(2):
            campaign = services.campaign_start(
                environment=arithmetic, probe_model=model, created_by=alice, policy="adaptive", rollouts=16,
                round_size=4, enqueue=False,
            )  # fmt: skip
            second = _estimate(model, arithmetic, policy="adaptive")
            services.campaign_run_inline(campaign=campaign)
    # The second and third campaigns' estimates: each task from its own attempts, which already decided it, so
    # about one round each, as the campaign then stored; the cap would have said four times as many.
    stored = Rollout.objects.filter(campaign=campaign).count()
    assert stored < TASKS * 16 / 2
    assert second["measured"] and "from their own" in second["basis"] and "no attempts yet" not in second["basis"]
    assert second["expected_rollouts"] == pytest.approx(stored, rel=0.25)
    assert second["rollouts_basis"] in second["basis"]
    mean_cost = second["cost_usd"] / second["expected_rollouts"]
    assert _estimate(model, arithmetic, policy="fixed")["cost_usd"] == pytest.approx(mean_cost * TASKS * 16, rel=0.05)


def test_the_confirm_page_shows_the_expected_rollouts_of_an_adaptive_probe(client, alice, arithmetic):
    import_tasks(
        arithmetic, alice, *[{"key": f"t{i}", "prompt": f"What is {i} + 42?", "answer": "x"} for i in range(3)]
    )
    services.probe_model_add(name="probe", backend="openai", base_url="http://127.0.0.1:9/v1", model="m")
    client.force_login(alice)
    page = client.post(
        f"/environments/{arithmetic.name}/probe/", {"model": "probe", "policy": "adaptive", "rollouts": "16"}
    ).content.decode()
    assert "= 48 rollouts at most" in page and 'id="estimate-expected"' in page
    assert "the stopping rule&#x27;s expected rollouts per task" in page
    fixed = client.post(
        f"/environments/{arithmetic.name}/probe/", {"model": "probe", "rollouts": "16"}
    ).content.decode()
    assert "= 48 rollouts of at most" in fixed and 'id="estimate-expected"' not in fixed
