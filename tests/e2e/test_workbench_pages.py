"""Bulk submit from the task list, the environment form, and the nav at phone width."""

import pytest

from curation.models import Environment, Task, TaskStatus
from tests.factories import import_tasks, math_task

pytestmark = pytest.mark.django_db(transaction=True)


def test_bulk_submit_from_the_task_list_filter(page, live_server, sign_in, screenshot, alice, arithmetic):
    import_tasks(
        arithmetic, alice, *[math_task(f"t-{i}", question=f"What is {i} + 2?", answer=str(i + 2)) for i in range(6)]
    )
    Task.objects.filter(key="t-5").update(status=TaskStatus.APPROVED)
    page.on("dialog", lambda dialog: dialog.accept())
    sign_in(page, "alice")
    page.goto(live_server.url + "/tasks/?environment=arithmetic&status=draft")
    page.select_option("#bulk-actions select[name=action]", "submit")
    page.click("#bulk-actions button")
    page.wait_for_selector("text=5 task(s) submitted for review; 0 skipped.")
    screenshot(page, "bulk-submit")
    assert set(Task.objects.exclude(key="t-5").values_list("status", flat=True)) == {TaskStatus.SUBMITTED}
    assert "status=draft" in page.url


def test_create_then_edit_an_environment(page, live_server, sign_in, screenshot, bob, settings):
    sign_in(page, "bob")
    page.goto(live_server.url + "/")
    page.click("#environment-new")
    assert page.input_value("#id_floor") == str(settings.PASSBAND_FLOOR)
    assert page.input_value("#id_retire_at") == str(settings.PASSBAND_RETIRE)
    page.fill("#id_name", "gsm8k")
    page.fill("#id_domain", "math")
    page.fill("#id_default_verifier", '{"kind": "math"}')
    page.fill("#id_max_new_tokens", "384")
    page.click("#environment-form button[type=submit]")
    page.wait_for_selector("#environment-gsm8k")
    page.locator("#environment-gsm8k a", has_text="Edit").click()
    page.fill("#id_retire_at", "0.6")
    page.fill("#id_title", "GSM8K")
    screenshot(page, "environment-form")
    page.click("#environment-form button[type=submit]")
    page.wait_for_selector("text=Environment gsm8k saved")
    environment = Environment.objects.get(name="gsm8k")
    assert (environment.title, environment.retire_at, environment.max_new_tokens) == ("GSM8K", 0.6, 384)


def test_sign_out_is_reachable_at_phone_width(new_context, live_server, alice, bob, screenshot):
    from django.contrib.auth.models import Group

    alice.groups.add(Group.objects.get_or_create(name="reviewers")[0])  # every nav link shows
    context = new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    page = context.new_page()
    page.goto(live_server.url + "/login/")
    page.fill("input[name=username]", "alice")
    page.fill("input[name=password]", "pw-alice")
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/login/" not in url)
    # Nothing sticks out sideways, and Sign out lies within the viewport.
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    box = page.locator(".whoami button").bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390
    screenshot(page, "phone-nav")
    page.locator(".whoami button").click()
    page.wait_for_url("**/login/")
    context.close()


def test_dashboard_charts_draw_for_the_chosen_environment(page, live_server, sign_in, screenshot, alice, arithmetic):
    from django.utils import timezone

    from calibration.models import Band, Calibration, Campaign, CampaignItem, ProbeModel, Rollout

    model = ProbeModel.objects.create(name="probe", backend="openai")
    import_tasks(
        arithmetic, alice, *[math_task(f"t-{i}", question=f"What is {i} + 2?", answer=str(i + 2)) for i in range(3)]
    )
    tasks = list(arithmetic.tasks.order_by("key"))
    campaign = Campaign.objects.create(
        environment=arithmetic, probe_model=model, created_by=alice, seed=1, status="cancelled"
    )
    CampaignItem.objects.bulk_create(
        [CampaignItem(campaign=campaign, task_version=t.current_version, done=i == 0) for i, t in enumerate(tasks)]
    )
    for task, band in zip(tasks, [Band.IN_BAND, Band.TOO_HARD, Band.RETIRE]):
        Calibration.objects.create(
            task_version=task.current_version, probe_model=model, band=band, pass_rate=0.4, attempts=8
        )
    Rollout.objects.bulk_create(
        [
            Rollout(
                campaign=campaign,
                task_version=tasks[0].current_version,
                probe_model=model,
                sample_index=i,
                seed=i,
                outcome="pass",
                verify_ms=2.0 + i,
                verified_at=timezone.now(),
            )
            for i in range(4)
        ]
    )
    sign_in(page, "alice")
    page.goto(live_server.url + "/dashboard/?environment=arithmetic&model=probe")
    for element in ("pass-rate-histogram", "bands-over-time", "cost-per-task", "verifier-latency", "campaign-progress"):
        page.wait_for_selector(f"#{element}[data-drawn=true]")
    # Latency ticks read as times of day, not fractions of a second.
    ticks = page.eval_on_selector_all("#verifier-latency .xtick text", "texts => texts.map((t) => t.textContent)")
    assert ticks and all("." not in tick for tick in ticks)
    screenshot(page, "dashboard-filtered")
