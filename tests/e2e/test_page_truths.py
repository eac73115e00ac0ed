"""Pages say what is true: a saved mapping applies when chosen, a skipped line is named, disabled buttons look
disabled, the probe form labels its fields and asks for a sample size only for a sample."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from calibration.models import Campaign, ProbeModel
from curation import import_jobs, import_mappings
from engine.task_mapping import ColumnMapping
from tests.factories import gsm8k_rows, import_tasks, math_task

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_saved_mapping_applies_when_chosen_and_a_line_that_is_not_json_is_named(
    page, live_server, sign_in, alice, arithmetic, media
):
    rows = [json.dumps(row) for row in gsm8k_rows(3)]
    data = "\n".join([rows[0], '{"question": "broken', *rows[1:]]) + "\n"
    upload = SimpleUploadedFile("gsm8k.jsonl", data.encode())
    job = import_jobs.import_job_create(environment=arithmetic, owner=alice, upload=upload, queue=False)
    saved = ColumnMapping(prompt="Saved: {question}", answer_column="answer", answer_extractor="after_hashes")
    import_mappings.import_mapping_save(environment=arithmetic, name="gsm8k", mapping=saved, by=alice)
    sign_in(page, "alice")
    page.goto(live_server.url + f"/tasks/upload/{job.pk}/map/")
    skipped = page.inner_text("#skipped-lines")
    assert "line 2" in skipped and "not valid JSON" in skipped
    assert page.input_value("input[name=prompt]") != "Saved: {question}"
    page.select_option("#saved-mapping-form select[name=mapping]", "gsm8k")  # no Use pressed
    page.wait_for_url("**/map/?mapping=gsm8k")
    assert page.input_value("input[name=prompt]") == "Saved: {question}"
    assert page.input_value("select[name=answer_extractor]") == "after_hashes"


def test_disabled_campaign_buttons_look_disabled(page, live_server, sign_in, alice, arithmetic):
    model = ProbeModel.objects.create(name="probe", backend="openai")
    campaign = Campaign.objects.create(
        environment=arithmetic, probe_model=model, created_by=alice, seed=1, status="cancelled"
    )
    sign_in(page, "alice")
    page.goto(live_server.url + f"/campaigns/{campaign.pk}/")
    style = "(el) => { const s = getComputedStyle(el); return [s.backgroundColor, s.color, s.cursor]; }"
    sign_out = page.locator(".whoami button")  # a plain enabled button, for comparison
    enabled_background = page.evaluate("() => getComputedStyle(document.createElement('button')).backgroundColor")
    for name in ("Pause", "Resume", "Cancel"):
        button = page.locator("button", has_text=name)
        assert button.is_disabled()
        background, colour, cursor = button.evaluate(style)
        assert cursor == "not-allowed", name
        assert background not in (enabled_background, "rgb(52, 81, 178)", "rgb(178, 59, 59)"), (name, background)
    assert sign_out.is_enabled()


def test_the_probe_form_labels_its_fields_and_shows_the_sample_size_only_for_a_sample(
    page, live_server, sign_in, alice, arithmetic
):
    import_tasks(arithmetic, alice, math_task("t-1"))
    ProbeModel.objects.create(name="probe", backend="openai")
    sign_in(page, "alice")
    page.goto(live_server.url + "/")
    form = page.locator("#environment-arithmetic form.probe-form")
    for text in ("Model", "Policy", "Rollouts per task", "Max new tokens", "Tasks"):
        label = form.locator("label", has_text=text)
        assert label.is_visible(), text
        assert label.locator("input, select").count() == 1, text  # the visible text labels its field
    sample_size = form.locator("input[name=sample_size]")
    assert form.locator("select[name=scope]").input_value() == "all" and not sample_size.is_visible()
    form.locator("select[name=scope]").select_option("sample")
    assert sample_size.is_visible() and form.locator("label", has_text="Sample size").is_visible()
    form.locator("select[name=scope]").select_option("all")
    assert not sample_size.is_visible()
