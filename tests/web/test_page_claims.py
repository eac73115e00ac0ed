"""What a page claims: the interval beside a band says how the band's rule differs from it; the stopping
rule's card keeps "undecided" apart from "wrong"; a missing authoring cost reads "not given"."""

import pytest
from django.urls import reverse

from calibration.models import Band, Calibration, Campaign, ProbeModel
from tests.factories import import_tasks, math_task

pytestmark = pytest.mark.django_db


def test_a_fixed_8_card_does_not_call_undecided_wrong(client, alice, arithmetic):
    model = ProbeModel.objects.create(name="probe", backend="openai", base_url="http://127.0.0.1:9/v1")
    Campaign.objects.create(
        environment=arithmetic, probe_model=model, created_by=alice, seed=1, policy="fixed", max_rollouts=8
    )
    client.force_login(alice)
    body = client.get(reverse("operating_characteristic_data"), {"environment": "arithmetic"}).json()
    rates, wrong, undecided = body["pass_rates"], body["wrong"], body["labels"]["borderline"]
    # At 0.5% or just under, below the floor zone, 8 attempts cannot prove a rate that low: undecided nearly always.
    low = max(index for index, rate in enumerate(rates) if 0 < rate <= 0.005)
    assert undecided[low] > 0.9
    # ... which is no band at all, not a wrong one: a wrong band (in_band or retire) is rare there.
    assert wrong[low] < 0.1
    for index in range(len(rates)):
        labels = sum(body["labels"][band][index] for band in ("too_hard", "in_band", "retire", "borderline"))
        assert wrong[index] + undecided[index] <= labels + 1e-9


def _task_page(client, alice, arithmetic, **calibration) -> str:
    """The task page of one task with one in-band calibration of these fields."""
    import_tasks(arithmetic, alice, math_task("task"))
    task = arithmetic.tasks.get()
    model = ProbeModel.objects.create(name="probe", backend="openai", base_url="http://127.0.0.1:9/v1")
    Calibration.objects.create(
        task_version=task.current_version, probe_model=model, band=Band.IN_BAND, decided=True, **calibration
    )
    client.force_login(alice)
    return client.get(reverse("task_detail", args=[arithmetic.name, task.key])).content.decode()


def test_the_interval_beside_a_band_says_how_the_band_was_decided(client, alice, arithmetic):
    page = _task_page(
        client, alice, arithmetic, attempts=8, successes=3, pass_rate=0.375, interval_low=0.119,
        interval_high=0.705, policy={"kind": "fixed", "confidence": 0.95},
    )  # fmt: skip
    assert "[0.119, 0.705]" in page
    assert "The band comes from the stopping rule, not from this interval" in page
    assert "retire zone 0.6–0.8" in page and "crosses the 0.7 line" in page


def test_an_interval_inside_its_band_needs_no_note(client, alice, arithmetic):
    page = _task_page(
        client, alice, arithmetic, attempts=64, successes=20, pass_rate=0.31, interval_low=0.2, interval_high=0.43
    )
    assert "The band comes from the stopping rule" not in page


def test_a_missing_authoring_cost_is_not_given_and_zero_is_zero(client, alice, arithmetic):
    without = {k: v for k, v in math_task("silent", question="What is 1 + 1?", answer="2").items()}
    del without["authoring_cost_usd"]
    import_tasks(
        arithmetic, alice, without, math_task("free", question="What is 2 + 2?", answer="4", authoring_cost_usd=0)
    )
    client.force_login(alice)
    silent = client.get(reverse("task_detail", args=[arithmetic.name, "silent"])).content.decode()
    free = client.get(reverse("task_detail", args=[arithmetic.name, "free"])).content.decode()
    assert 'authoring cost <span id="authoring-cost-not-given">not given</span>' in silent and "$0.00" not in silent
    assert "authoring cost $0.00" in free
