"""The dashboard's charts at phone width: legends clear of axis titles, no negative axes when empty, the floor visible."""

import pytest
from django.utils import timezone

from calibration.models import Band, Calibration, Campaign, CampaignItem, ProbeModel, Rollout
from tests.factories import import_tasks, math_task

pytestmark = pytest.mark.django_db(transaction=True)

CHARTS = ("pass-rate-histogram", "bands-over-time", "cost-per-task", "verifier-latency", "campaign-progress")
# Each chart's legend and x-axis title as boxes; the two overlap when they share any pixel.
BOXES = """(id) => {
  const box = (selector) => { const el = document.querySelector('#' + id + ' ' + selector); if (!el) return null;
    const r = el.getBoundingClientRect(); return { left: r.left, right: r.right, top: r.top, bottom: r.bottom }; };
  return { legend: box('.legend'), title: box('.xtitle'), ticks: box('.xaxislayer-above') };
}"""


def overlap(a, b) -> bool:
    return (
        bool(a and b)
        and a["left"] < b["right"]
        and b["left"] < a["right"]
        and a["top"] < b["bottom"]
        and b["top"] < a["bottom"]
    )


def phone_page(new_context, sign_in, username):
    page = new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True).new_page()
    sign_in(page, username)
    return page


@pytest.fixture
def probed(alice, arithmetic):
    model = ProbeModel.objects.create(name="probe", backend="openai")
    import_tasks(arithmetic, alice, *[math_task(f"t-{i}", question=f"What is {i} + 2?") for i in range(4)])
    campaign = Campaign.objects.create(environment=arithmetic, probe_model=model, created_by=alice, seed=1)
    for index, task in enumerate(arithmetic.tasks.order_by("key")):
        CampaignItem.objects.create(campaign=campaign, task_version=task.current_version, done=True)
        Calibration.objects.create(
            task_version=task.current_version,
            probe_model=model,
            band=Band.TOO_HARD if index < 3 else Band.IN_BAND,
            pass_rate=0.0 if index < 3 else 0.5,
            attempts=8,
            successes=0 if index < 3 else 4,
        )
        Rollout.objects.create(
            campaign=campaign,
            task_version=task.current_version,
            probe_model=model,
            sample_index=0,
            seed=0,
            outcome="pass",
            verify_ms=2.0,
            verified_at=timezone.now(),
        )
    return arithmetic


def test_legends_stay_clear_of_axis_titles_at_phone_width(new_context, sign_in, live_server, screenshot, probed):
    page = phone_page(new_context, sign_in, "alice")
    page.goto(live_server.url + "/dashboard/?environment=arithmetic&model=probe")
    for chart in CHARTS:
        page.wait_for_selector(f"#{chart}[data-drawn=true]")
    screenshot(page, "dashboard-phone")
    for chart in CHARTS:
        boxes = page.evaluate(BOXES, chart)
        assert boxes["legend"] is not None, chart
        assert not overlap(boxes["legend"], boxes["title"]), (chart, boxes)
        assert not overlap(boxes["legend"], boxes["ticks"]), (chart, boxes)


def test_the_floor_line_is_drawn_above_the_too_hard_bar_in_its_own_colour(page, live_server, sign_in, probed):
    sign_in(page, "alice")
    page.goto(live_server.url + "/dashboard/?environment=arithmetic&model=probe")
    page.wait_for_selector("#pass-rate-histogram[data-drawn=true]")
    floor = page.locator("#pass-rate-histogram .layer-above .shapelayer path").first
    bar = page.locator("#pass-rate-histogram .trace.bars .point path").first
    floor_colour = floor.evaluate("(el) => getComputedStyle(el).stroke")
    bar_colour = bar.evaluate("(el) => getComputedStyle(el).fill")
    assert floor_colour != bar_colour


def test_empty_charts_have_no_negative_axes(page, live_server, sign_in, alice, arithmetic):
    sign_in(page, "alice")
    page.goto(live_server.url + "/dashboard/?environment=arithmetic")
    for chart in CHARTS:
        page.wait_for_selector(f"#{chart}[data-drawn=true]")
    for chart in CHARTS:
        ticks = page.eval_on_selector_all(
            f"#{chart} .xtick text, #{chart} .ytick text", "ts => ts.map((t) => t.textContent)"
        )
        assert not [tick for tick in ticks if tick.startswith(("-", "\u2212"))], (chart, ticks)
