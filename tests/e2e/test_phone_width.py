"""Every page fits a phone: at 390 px nothing makes the page wider than the screen.

Wide tables may scroll inside their own container; the page itself never scrolls sideways.
"""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from calibration.models import Band, Calibration, Campaign, CampaignItem, ProbeModel, Rollout
from calibration.services.health import EpisodeAttempt, episode_health_record
from curation import import_jobs
from curation.models import TaskStatus
from curation.services import task_transition
from tests.factories import gsm8k_rows, import_tasks, jsonl, math_task

pytestmark = pytest.mark.django_db(transaction=True)

PHONE = {"width": 390, "height": 844}
# Whatever sticks out past the right edge, named so a failure says where to look.
OVERFLOWING = """() => [...document.querySelectorAll('body *')]
  .filter((el) => el.getBoundingClientRect().right > 391 && !el.closest('.table-scroll, table.data, .js-plotly-plot'))
  .slice(0, 5).map((el) => el.tagName + (el.id ? '#' + el.id : '') + '.' + el.className)"""


@pytest.fixture
def workbench(alice, staff, arithmetic, media):
    """Tasks with long keys and a long prompt, a campaign with rollouts, a comment and an upload awaiting its mapping."""
    long_question = "What is the sum of the first hundred positive integers, counted one by one? " * 3
    import_tasks(
        arithmetic,
        alice,
        math_task("gsm8k/test/a-rather-long-key-made-from-a-file-name/1", question=long_question, answer="5050"),
        *[math_task(f"t-{i}", question=f"What is {i} + 2?", answer=str(i + 2)) for i in range(3)],
    )
    model = ProbeModel.objects.create(name="probe-with-a-long-model-name", backend="openai")
    campaign = Campaign.objects.create(environment=arithmetic, probe_model=model, created_by=alice, seed=1)
    for index, task in enumerate(arithmetic.tasks.order_by("key")):
        CampaignItem.objects.create(campaign=campaign, task_version=task.current_version, done=True)
        Calibration.objects.create(
            task_version=task.current_version,
            probe_model=model,
            band=[Band.IN_BAND, Band.TOO_HARD, Band.RETIRE, Band.UNDECIDED][index],
            attempts=8,
            successes=index,
            pass_rate=index / 8,
            interval_low=0,
            interval_high=0.5,
        )
        Rollout.objects.bulk_create(
            [
                Rollout(
                    campaign=campaign,
                    task_version=task.current_version,
                    probe_model=model,
                    sample_index=sample,
                    seed=sample,
                    text="The answer is " + "1234567890" * 12,
                    outcome="pass" if sample < index else "fail",
                    verify_ms=2.0,
                    verified_at=timezone.now(),
                )
                for sample in range(3)
            ]
        )
        task_transition(task=task, to_status=TaskStatus.SUBMITTED, by=alice)
    attempts = [EpisodeAttempt(transcript={"reset_ms": 41.5, "counts": {"tool_calls": 3, "tool_error": 1}})] * 2
    failure = "environment backoffice could not reset from seed 12345678901234567890: " + "a long reason " * 8
    episode_health_record(
        environment=arithmetic, world="backoffice", attempts=[*attempts, EpisodeAttempt(failure=failure)]
    )
    upload = SimpleUploadedFile("gsm8k.jsonl", jsonl(*gsm8k_rows(3)))
    job = import_jobs.import_job_create(environment=arithmetic, owner=staff, upload=upload, queue=False)
    return {"campaign": campaign, "model": model, "job": job}


def test_every_page_fits_a_phone(new_context, live_server, workbench, screenshot):
    campaign, job = workbench["campaign"], workbench["job"]
    key = "gsm8k/test/a-rather-long-key-made-from-a-file-name/1"
    pages = [
        "/",
        "/tasks/",
        f"/tasks/arithmetic/{key}/",
        f"/tasks/arithmetic/{key}/edit/",
        "/tasks/upload/",
        f"/tasks/upload/{job.pk}/map/",
        "/rollouts/",
        "/review/",
        "/review/duplicates/",
        "/environments/new/",
        "/environments/arithmetic/edit/",
        "/environments/arithmetic/",
        "/dashboard/",
        f"/campaigns/{campaign.pk}/",
        "/models/compare/",
        "/tokens/",
        "/releases/",
    ]
    page = new_context(viewport=PHONE, is_mobile=True, has_touch=True).new_page()
    page.goto(live_server.url + "/login/")
    page.fill("input[name=username]", "sam")
    page.fill("input[name=password]", "pw-sam")
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/login/" not in url)
    too_wide = {}
    for path in pages:
        response = page.goto(live_server.url + path)
        assert response.status == 200, path
        page.wait_for_load_state("networkidle")
        width = page.evaluate("document.documentElement.scrollWidth")
        if width > PHONE["width"]:
            too_wide[path] = (width, page.evaluate(OVERFLOWING))
            screenshot(page, "phone-too-wide-" + path.strip("/").replace("/", "-"))
    assert not too_wide, "\n".join(f"{path}: {width} px, {what}" for path, (width, what) in too_wide.items())
