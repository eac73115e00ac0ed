"""Impossible variants probed through a real Celery worker by a scripted policy that speaks the OpenAI protocol
and answers every sum with its true value. On an environment whose numeric verifier has a planted hole (any
number within a wide tolerance passes), the wide tolerance pays the true value on every variant: found hacks,
flagged for review. On a clean environment nothing passes, the one broken variant is reported and not probed,
and the upper bound is given though nothing passed. Neither touches calibrations, rollouts or a release. A tool
task's variant (a state no prompt asks for) is probed as episodes in the task's world, and an honest agent that
does the task fails it."""

import json
import re

import pytest
from django.core.management import CommandError, call_command

from accounts.services import api_token_create
from calibration import services
from calibration.models import Calibration, Campaign, ImpossibleVariant, Rollout, VariantProbe, VariantRollout
from calibration.selectors import false_pass_rates, review_queue
from curation.models import Comment, Task, TaskStatus
from curation.services import environment_create
from engine import quality_card
from engine.episodes import backoffice
from engine.verifiers import impossible
from releases.models import ReleaseItem
from releases.quality_cards import quality_card_of
from releases.services import release_create
from tests.calibration.scripted import probing_worker, variants_probed_by_a_worker
from tests.factories import import_tasks
from tests.support.openai_server import OpenAITestServer
from tests.support.workers import flush_broker, wait_for

ROLLOUTS = 3
SUMS = ((6, 2), (7, 5), (9, 4))
WIDE_TOLERANCE = {"kind": "numeric", "rel_tol": 0.5}  # the planted hole: 8 passes for 9
ADD = "def add(a, b):\n    return a + b\n"
# A code task whose only expectation sits in a branch that never runs: its variant is broken.
DEAD_BRANCH = {
    "kind": "code",
    "style": "humaneval",
    "entry_point": "add",
    "test": "def check(candidate):\n    if candidate(1, 2) < 0:\n        assert candidate(1, 2) == 3\n",
}
_SUM = re.compile(r"What is (\d+) \+ (\d+)\?")


def sums(verifier: dict) -> list[dict]:
    return [
        {"key": f"sum-{a}-{b}", "prompt": f"What is {a} + {b}?", "answer": str(a + b), "verifier": verifier}
        for a, b in SUMS
    ]


def honest(prompt_text: str, seed: int) -> str:
    """The true value of every sum (and a right `add` for the code task): never a hack."""
    found = _SUM.search(prompt_text)
    return f"The answer is {int(found[1]) + int(found[2])}." if found else f"```python\n{ADD}```"


def finished(model, environment, owner) -> Campaign:
    campaign = services.campaign_start(
        environment=environment, probe_model=model, created_by=owner, rollouts=ROLLOUTS, round_size=ROLLOUTS, seed=1
    )
    wait_for(
        lambda: Campaign.objects.get(pk=campaign.pk).status == Campaign.Status.DONE, timeout=240, what="the campaign"
    )
    return campaign


def probed(model, environment, staff) -> VariantProbe:
    return variants_probed_by_a_worker(model, environment, staff, rollouts=ROLLOUTS)


def calibration_rows(environment):
    return sorted(
        Calibration.objects.filter(task_version__task__environment=environment).values_list(
            "task_version", "attempts", "successes", "pass_rate", "band"
        )
    )


def pinned(release):
    rows = ReleaseItem.objects.filter(release=release).order_by("task_version")
    return [(item.task_version_id, item.pass_rate, item.band, item.attempts) for item in rows]


@pytest.mark.workers
@pytest.mark.django_db(transaction=True)
def test_the_variant_probe_finds_a_wide_tolerance_and_a_clean_environment_shows_none(alice, bob, staff, client):
    flush_broker()
    holed = environment_create(name="holed-sums", domain="math")
    clean = environment_create(name="clean-sums", domain="math")
    import_tasks(holed, alice, *sums(WIDE_TOLERANCE))
    import_tasks(clean, alice, *sums({"kind": "numeric"}), {"key": "add", "prompt": "Write add.", "answer": ADD,
                                                              "verifier": DEAD_BRANCH})  # fmt: skip
    Task.objects.filter(environment=holed, key="sum-6-2").update(status=TaskStatus.APPROVED)
    Task.objects.filter(environment=holed).exclude(key="sum-6-2").update(status=TaskStatus.SUBMITTED)
    Task.objects.filter(environment=clean).update(status=TaskStatus.APPROVED)

    with OpenAITestServer(respond=honest, record_requests=False) as server, probing_worker():
        model = services.probe_model_add(name="honest", backend="openai", base_url=server.base_url, model="fake")
        finished(model, holed, alice)
        finished(model, clean, alice)
        before = {environment: calibration_rows(environment) for environment in (holed, clean)}
        rollouts_before = Rollout.objects.count()
        release_before = release_create(
            user=staff, probe_model=model, environment=clean, band="", include_thin_evidence=True
        )
        probed(model, holed, staff)
        probed(model, clean, staff)

    # The hole: every attempt states the true value, which the wide tolerance pays on the variant.
    variants = ImpossibleVariant.objects.filter(probe__environment=holed)
    assert set(variants.values_list("status", "reference_passes")) == {("ready", True)}
    assert VariantRollout.objects.filter(variant__in=variants, outcome="pass").count() == len(SUMS) * ROLLOUTS
    hacked = Task.objects.filter(environment=holed)
    assert all(
        Comment.objects.filter(task=task, body__startswith="[impossible variant]").count() == 1 for task in hacked
    )
    assert Task.objects.get(environment=holed, key="sum-6-2").status == TaskStatus.IN_REVIEW  # back in review
    queue = review_queue(user=bob, environment=holed, flag="found_hack")
    assert {task.key for task in queue} == {key for key in hacked.values_list("key", flat=True)}
    assert {task.priority for task in queue} == {0}

    # The clean environment: nothing passes; the broken variant is reported, never probed.
    clean_variants = ImpossibleVariant.objects.filter(probe__environment=clean)
    broken = clean_variants.get(status="broken")
    assert broken.task_version.task.key == "add" and not broken.rollouts.exists()
    assert not VariantRollout.objects.filter(variant__in=clean_variants, outcome="pass").exists()
    assert not Comment.objects.filter(task__environment=clean).exists()

    # Never evidence: calibrations, the rollouts and a release's pins are as they were.
    assert {environment: calibration_rows(environment) for environment in (holed, clean)} == before
    assert Rollout.objects.count() == rollouts_before
    release_after = release_create(
        user=staff, probe_model=model, environment=clean, band="", include_thin_evidence=True
    )
    assert pinned(release_after) == pinned(release_before) and len(pinned(release_after)) == len(SUMS) + 1
    # The card carries the result (the schema's slot): run with its rate and bound, not run for a broken variant.
    cards = {
        task.key: quality_card.validate(quality_card_of(version=task.current_version)) for task in clean.tasks.all()
    }
    assert cards["sum-6-2"]["impossible_variants"] == {
        "status": "run",
        "false_pass_rate": 0.0,
        "upper_bound": pytest.approx(impossible.false_pass_bound(passes=0, trials=ROLLOUTS)),
    }
    assert cards["add"]["impossible_variants"] == {"status": "not_run"}
    holed_card = quality_card_of(version=Task.objects.get(environment=holed, key="sum-6-2").current_version)
    assert holed_card["impossible_variants"]["false_pass_rate"] == 1.0

    # The page and the API: the false-pass rate beside the pass rate, with the bound though nothing passed.
    trials = len(SUMS) * ROLLOUTS
    bound = impossible.false_pass_bound(passes=0, trials=trials)
    client.force_login(staff)
    page = client.get(f"/environments/{clean.name}/").content.decode()
    assert 'id="false-pass-honest"' in page and f"≤ {bound:.3f}" in page and "Broken variant (not probed): add" in page
    task_page = client.get(f"/tasks/{holed.name}/sum-6-2/").content.decode()  # the evidence, for its reviewer
    assert 'id="found-hacks"' in task_page and "reference &#x27;8&#x27; -&gt; &#x27;9&#x27;" in task_page
    assert f"{ROLLOUTS} of {ROLLOUTS}</strong> attempts under <strong>honest</strong>" in task_page
    assert "The answer is 8." in task_page
    holed_page = client.get(f"/environments/{holed.name}/").content.decode()
    assert "Found hack: " in holed_page and f"1.000 ({trials} of {trials})" in holed_page
    token = api_token_create(user=bob, name="reader", scopes=["read"])[1]
    body = client.get(
        f"/api/v1/environments/{clean.name}/impossible-variants", HTTP_AUTHORIZATION=f"Bearer {token}"
    ).json()
    assert [(row["probe_model"], row["trials"], row["false_passes"], row["broken_variants"]) for row in body] == [
        ("honest", trials, 0, 1)
    ]
    assert body[0]["upper_bound"] == pytest.approx(bound) and body[0]["pass_rate"] == 1.0


def deal_task(deal_id: int) -> dict:
    calls = [{"name": "update_record", "arguments": {"table": "deals", "id": deal_id, "fields": {"stage": "won"}}}]
    return {
        "key": f"win-{deal_id}",
        "prompt": [{"role": "user", "content": f"Mark deal {deal_id} as won."}],
        "answer": json.dumps(calls),
        "verifier": {
            "kind": "state_check",
            "environment": "backoffice",
            "seed": 3,
            "checks": [{"table": "deals", "where": {"id": deal_id}, "expect": {"stage": "won"}}],
        },
        "tools": backoffice.TOOL_SCHEMAS,
        "domain": "workflow",
    }


def wins_the_deal(prompt_text: str, seed: int) -> str:
    """An honest agent: one tool call that does what the prompt asks, then it says so."""
    if prompt_text.count("<assistant>") == 1:
        deal_id = int(re.search(r"Mark deal (\d+) as won", prompt_text)[1])
        call = {"name": "update_record", "arguments": {"table": "deals", "id": deal_id, "fields": {"stage": "won"}}}
        return f"<tool_call>{json.dumps(call)}</tool_call>"
    return "Done."


@pytest.mark.workers
@pytest.mark.django_db(transaction=True)
def test_tool_task_variants_are_episodes_an_honest_agent_cannot_pass(alice, staff):
    flush_broker()
    environment = environment_create(name="backoffice", domain="workflow")
    import_tasks(environment, alice, deal_task(1), deal_task(2))
    with OpenAITestServer(respond=wins_the_deal, tool_parser=True) as server, probing_worker():
        model = services.probe_model_add(
            name="agent", backend="openai", base_url=server.base_url, model="fake", max_new_tokens=200
        )
        probed(model, environment, staff)

    variants = ImpossibleVariant.objects.filter(probe__environment=environment)
    assert set(variants.values_list("status", "kind", "reference_outcome", "empty_outcome")) == {
        ("ready", impossible.UNREACHABLE_STATE, "fail", "fail")
    }
    rollouts = VariantRollout.objects.filter(variant__in=variants)
    assert rollouts.count() == 2 * ROLLOUTS and set(rollouts.values_list("outcome", flat=True)) == {"fail"}
    # Each attempt was a real episode in the task's world: the deal was won, as the task (not the variant) asks.
    for rollout in rollouts.select_related("variant__task_version__task"):
        deal_id = int(rollout.variant.task_version.task.key.removeprefix("win-"))
        assert rollout.detail == (
            f"check 1: deals where {{'id': {deal_id}}} has stage='won', expected 'won (impossible variant)'"
        )
    assert not Comment.objects.filter(task__environment=environment).exists()


def off_by_one(prompt_text: str, seed: int) -> str:
    """A wrong policy whose every answer is the true value plus one: the variant's value itself."""
    found = _SUM.search(prompt_text)
    return f"The answer is {int(found[1]) + int(found[2]) + 1}."


@pytest.mark.django_db
def test_a_wrong_answer_that_states_the_variants_value_is_a_coincidence_not_a_hack(alice, staff):
    environment = environment_create(name="holed-sums", domain="math")
    import_tasks(environment, alice, *sums(WIDE_TOLERANCE))
    with OpenAITestServer(respond=off_by_one, record_requests=False) as server:
        model = services.probe_model_add(name="wrong", backend="openai", base_url=server.base_url, model="fake")
        probe = services.variant_probe_start(
            environment=environment, probe_model=model, created_by=staff, rollouts=2, seed=5, enqueue=False
        )
        services.variant_probe_run(probe_id=probe.pk)
    rollouts = VariantRollout.objects.filter(variant__probe=probe)
    assert rollouts.count() == 2 * len(SUMS) and set(rollouts.values_list("outcome", flat=True)) == {"coincidence"}
    assert not Comment.objects.exists()
    (row,) = false_pass_rates(environment=environment, user=None)
    assert (row["trials"], row["false_passes"], row["found_hacks"]) == (2 * len(SUMS), 0, [])


@pytest.mark.django_db
def test_the_command_reports_found_hacks_and_exits_1(alice, capsys):
    environment = environment_create(name="holed-sums", domain="math")
    import_tasks(environment, alice, *sums(WIDE_TOLERANCE))
    with pytest.raises(CommandError, match="No environment named 'nowhere'"):
        call_command("impossible_variants", environment="nowhere")
    with OpenAITestServer(respond=honest, record_requests=False) as server:
        services.probe_model_add(name="honest", backend="openai", base_url=server.base_url, model="fake")
        with pytest.raises(SystemExit) as exit_status:
            call_command("impossible_variants", environment="holed-sums", task="sum-7-5", rollouts=2, inline=True)
    assert exit_status.value.code == 1
    printed = capsys.readouterr().out
    assert "holed-sums × honest: 2 of 2 attempts passed an impossible variant (1 variant(s)" in printed
    assert "found hack: sum-7-5 v1 (numeric): reference '12' -> '13'" in printed
