"""The adaptive policy probes with a table learned from the environment's own population once it has
enough tasks with evidence (calibration.services.environment_learned_table)."""

import pytest
from django.urls import reverse

from calibration import services
from calibration.models import Calibration, Campaign, ProbeModel, Rollout
from calibration.services.policies import sampling_policy, thresholds_for
from curation.models import TaskVersion
from engine import stats
from tests.calibration.scripted import import_scripted, scripted_model
from tests.factories import import_tasks, math_task, rollouts_with

pytestmark = pytest.mark.django_db

ADAPTIVE = {"kind": "adaptive", "round_size": 8, "max_rollouts": 256, "confidence": 0.95}


@pytest.fixture(autouse=True)
def _fresh_learning_cache():
    """Learned tables are cached by environment id, and SQLite hands the same ids to the next
    test's environments: each test learns afresh."""
    from django.core.cache import cache

    cache.clear()


def calibrate_extremes(tasks, model):
    """Calibrations of ``tasks``: the first half never passed in 72, the second passed 40 of 48."""
    half = len(tasks) // 2
    Calibration.objects.bulk_create(
        Calibration(
            task_version=task.current_version,
            probe_model=model,
            attempts=72 if index < half else 48,
            successes=0 if index < half else 40,
            band="too_hard" if index < half else "retire",
            decided=True,
        )
        for index, task in enumerate(tasks)
    )


@pytest.fixture
def environment_of_extremes(arithmetic, alice):
    """61 tasks: t0 has failed 64 times; of the rest half never passed in 72, half passed 40 of 48."""
    import_tasks(
        arithmetic,
        alice,
        *[math_task(f"t{index}", question=f"What is {index} + 3?", answer=str(index + 3)) for index in range(61)],
    )
    tasks = {task.key: task for task in arithmetic.tasks.all()}
    rollouts_with(tasks["t0"], alice, ["fail"] * 64)
    model = ProbeModel.objects.get(name="probe")
    calibrate_extremes([tasks[f"t{index}"] for index in range(1, 61)], model)
    return tasks["t0"], model


def test_the_rule_decides_below_the_minimum(environment_of_extremes, settings):
    task, model = environment_of_extremes
    settings.PASSBAND_LEARNED_MIN_TASKS = 100  # 60 tasks with evidence: too few
    calibration = services.calibration_refresh(task_version=task.current_version, probe_model=model, policy=ADAPTIVE)
    assert calibration.band == "undecided"  # the calibrated rule wants 72 failures
    assert (
        services.environment_learned_table(
            environment=task.environment, probe_model=model, policy=sampling_policy(ADAPTIVE, attempts=0)
        )
        is None
    )


def test_a_population_without_a_shoulder_above_the_floor_decides_sooner(environment_of_extremes, settings):
    task, model = environment_of_extremes
    settings.PASSBAND_LEARNED_MIN_TASKS = 50
    calibration = services.calibration_refresh(task_version=task.current_version, probe_model=model, policy=ADAPTIVE)
    assert calibration.band == "too_hard" and calibration.decided
    # fixed N keeps the rule: 64 failures in 64 are not enough there
    fixed = {"kind": "fixed", "round_size": 64, "max_rollouts": 64, "confidence": 0.95}
    assert (
        services.calibration_refresh(task_version=task.current_version, probe_model=model, policy=fixed).band
        == "undecided"
    )


def test_the_dashboard_shows_the_operating_characteristic_with_and_without_the_learned_table(
    environment_of_extremes, settings, client, alice
):
    task, model = environment_of_extremes
    Campaign.objects.create(
        environment=task.environment, probe_model=model, created_by=alice, seed=3, policy="adaptive", max_rollouts=256
    )
    client.force_login(alice)
    url = reverse("operating_characteristic_data")
    settings.PASSBAND_LEARNED_MIN_TASKS = 100
    assert client.get(url, {"environment": task.environment.name}).json()["learned"] is None
    settings.PASSBAND_LEARNED_MIN_TASKS = 50
    body = client.get(url, {"environment": task.environment.name}).json()
    learned = body["learned"]
    assert learned["probe_model"] == "probe"
    never = body["pass_rates"].index(0.0)
    # Tasks that never pass: decided sooner, still too_hard; the rule's curve is the same as before.
    assert learned["expected_rollouts"][never] < body["expected_rollouts"][never] == pytest.approx(72.0)
    assert learned["labels"]["too_hard"][never] > 0.99


def test_the_dashboard_says_why_an_environment_keeps_the_rule(arithmetic, alice, settings, client):
    """60 tasks that each passed 2 of 48: enough to learn from at a minimum of 50, but any table
    learned could harm a population that evidence allows, so the rule is kept, and the page says
    so with the engine's own reason."""
    import_tasks(
        arithmetic,
        alice,
        *[math_task(f"t{index}", question=f"What is {index} + 5?", answer=str(index + 5)) for index in range(60)],
    )
    model = ProbeModel.objects.create(name="probe", backend="openai", base_url="http://127.0.0.1:9/v1")
    Calibration.objects.bulk_create(
        Calibration(task_version=task.current_version, probe_model=model, attempts=48, successes=2, band="in_band")
        for task in arithmetic.tasks.all()
    )
    Campaign.objects.create(
        environment=arithmetic, probe_model=model, created_by=alice, seed=3, policy="adaptive", max_rollouts=256
    )
    settings.PASSBAND_LEARNED_MIN_TASKS = 50
    expected = stats.learned_table_from_evidence(
        evidence=[(2, 48)] * 60,
        thresholds=thresholds_for(arithmetic),
        policy=stats.SamplingPolicy(),
        seed=arithmetic.pk,
        min_tasks=50,
    )
    assert not expected.learned and "population the evidence allows" in expected.reason
    client.force_login(alice)
    body = client.get(reverse("operating_characteristic_data"), {"environment": arithmetic.name}).json()
    assert body["learned"] is None
    assert body["learning"] == {"probe_model": "probe", "rule_kept_because": expected.reason}
    settings.PASSBAND_LEARNED_MIN_TASKS = 100  # too few tasks: nothing to say
    assert (
        client.get(reverse("operating_characteristic_data"), {"environment": arithmetic.name}).json()["learning"]
        is None
    )


@pytest.mark.parametrize(("minimum", "rollouts"), [(0, 72), (50, 64)])
def test_a_campaign_stops_where_the_learned_table_does(arithmetic, alice, settings, minimum, rollouts):
    """Through the campaign path (scripted model server, verifier, rounds, refresh): a task that never
    passes, in an environment whose other tasks never pass or nearly always do, is banded too_hard
    after 64 rollouts under the learned table, 72 under the rule."""
    settings.PASSBAND_LEARNED_MIN_TASKS = minimum
    keys = ["never"] + [f"background-{index}" for index in range(60)]
    import_scripted(arithmetic, alice, keys)
    with scripted_model("scripted", dict.fromkeys(keys, 0.0)) as (model, _server):
        calibrate_extremes([arithmetic.tasks.get(key=f"background-{index}") for index in range(60)], model)
        never = arithmetic.tasks.get(key="never").current_version
        campaign = services.campaign_start(
            environment=arithmetic,
            probe_model=model,
            created_by=alice,
            policy="adaptive",
            rollouts=256,
            seed=5,
            enqueue=False,
            task_versions=[never],
        )
        services.campaign_run_inline(campaign=campaign)
    calibration = Calibration.objects.get(task_version=never, probe_model=model)
    assert calibration.band == "too_hard" and calibration.attempts == rollouts
    assert Rollout.objects.filter(task_version=never).count() == rollouts


def test_a_learned_mixture_gives_each_task_its_own_table(environment_of_extremes, settings):
    """With PASSBAND_LEARNED_MIXTURE the learned policy may mix two tables: each task follows the
    one its id picks (stats.follows_cheaper), the same on every refresh, and without an id the
    table that meets the limits on its own."""
    from engine import stats

    task, model = environment_of_extremes
    settings.PASSBAND_LEARNED_MIN_TASKS = 50
    settings.PASSBAND_LEARNED_MIXTURE = True
    policy = sampling_policy(ADAPTIVE, attempts=0)
    tables = services.learning.environment_learned_tables(
        environment=task.environment, probe_model=model, policy=policy
    )
    assert tables is not None
    alone = services.environment_learned_table(environment=task.environment, probe_model=model, policy=policy)
    assert stats.table_to_lists(alone) == stats.table_to_lists(tables.table)
    for task_id in range(1, 200):
        expected = (
            tables.cheaper
            if tables.cheaper is not None and stats.follows_cheaper(task_id, tables.share)
            else tables.table
        )
        got = services.environment_learned_table(
            environment=task.environment, probe_model=model, policy=policy, task=task_id
        )
        assert stats.table_to_lists(got) == stats.table_to_lists(expected)
    # and the refresh bands the task that has failed 64 times by its own table
    own = tables.table_for(task.pk)
    calibration = services.calibration_refresh(task_version=task.current_version, probe_model=model, policy=ADAPTIVE)
    verdict = stats.assess(successes=0, attempts=64, thresholds=stats.Thresholds(), policy=policy, table=own)
    assert calibration.decided == verdict.decided


@pytest.fixture
def environment_with_declared_difficulty(arithmetic, alice):
    """60 calibrated tasks: 30 declared hard that never passed in 72, 30 declared easy that passed 40 of
    48; and three that have each failed 48 times: declared hard, declared easy, and declaring nothing."""
    import_tasks(
        arithmetic,
        alice,
        *[
            math_task(f"t{index}", question=f"What is {index} + 3?", answer=str(index + 3), difficulty=difficulty)
            for index, difficulty in enumerate(["hard"] * 30 + ["easy"] * 30)
        ],
        math_task("declared-hard", question="What is 7 * 8?", answer="56", difficulty="hard"),
        math_task("declared-easy", question="What is 7 * 9?", answer="63", difficulty=1),
        math_task("undeclared", question="What is 7 * 7?", answer="49"),
    )
    model = ProbeModel.objects.get_or_create(
        name="probe", defaults={"backend": "openai", "base_url": "http://127.0.0.1:9/v1"}
    )[0]
    calibrate_extremes([arithmetic.tasks.get(key=f"t{index}") for index in range(60)], model)
    probes = {key: arithmetic.tasks.get(key=key) for key in ("declared-hard", "declared-easy", "undeclared")}
    for task in probes.values():
        rollouts_with(task, alice, ["fail"] * 48)
    return probes, model


def test_a_task_follows_the_table_of_its_declared_difficulty(environment_with_declared_difficulty, settings):
    """Side information in the service: 48 failures in 48 band a task declared hard too_hard (its
    stratum never passes); the same counts stay undecided for a task declared easy (none of its
    stratum fails like that) and for one that declares nothing (the table learned without side
    information wants 64, the rule 72)."""
    probes, model = environment_with_declared_difficulty
    settings.PASSBAND_LEARNED_MIN_TASKS = 50
    calibrations = services.calibrations_refresh(
        task_versions=[task.current_version for task in probes.values()],
        probe_model=model,
        policies={task.current_version_id: ADAPTIVE for task in probes.values()},
    )
    band = {key: calibrations[task.current_version_id] for key, task in probes.items()}
    assert (band["declared-hard"].band, band["declared-hard"].decided) == ("too_hard", True)
    assert band["declared-easy"].band == "undecided" and band["undeclared"].band == "undecided"
    learning = services.environment_learning(
        environment=probes["undeclared"].environment, probe_model=model, policy=sampling_policy(ADAPTIVE, attempts=0)
    )
    assert learning is not None and learning.tables is not None
    assert learning.strata_reason == "learned" and learning.strata_source == "declared difficulty"
    assert learning.tables.cuts == (-2.0,) and len(learning.tables.strata) == 2
    # Without learning the same task declared hard waits for the rule's 72.
    settings.PASSBAND_LEARNED_MIN_TASKS = 0
    again = services.calibration_refresh(
        task_version=probes["declared-hard"].current_version, probe_model=model, policy=ADAPTIVE
    )
    assert again.band == "undecided"


def test_too_few_declared_difficulties_learn_no_strata(environment_with_declared_difficulty, settings):
    """40 of the 60 calibrated tasks declare a difficulty, under a minimum of 50: the environment learns
    its table without side information, no strata, and the task declared hard follows that table."""
    probes, model = environment_with_declared_difficulty
    settings.PASSBAND_LEARNED_MIN_TASKS = 50
    TaskVersion.objects.filter(
        task__key__in=[f"t{index}" for index in range(10)] + [f"t{index}" for index in range(30, 40)]
    ).update(declared_difficulty=None)
    learning = services.environment_learning(
        environment=probes["undeclared"].environment, probe_model=model, policy=sampling_policy(ADAPTIVE, attempts=0)
    )
    assert learning is not None and learning.reason == "learned" and learning.strata_reason is None
    assert learning.tables is not None and learning.tables.strata == ()
    calibration = services.calibration_refresh(
        task_version=probes["declared-hard"].current_version, probe_model=model, policy=ADAPTIVE
    )
    assert calibration.band == "undecided"


def test_the_dashboard_says_which_tables_the_declared_difficulty_picks(
    environment_with_declared_difficulty, settings, client, alice
):
    probes, model = environment_with_declared_difficulty
    environment = probes["undeclared"].environment
    Campaign.objects.create(
        environment=environment, probe_model=model, created_by=alice, seed=3, policy="adaptive", max_rollouts=256
    )
    settings.PASSBAND_LEARNED_MIN_TASKS = 50
    client.force_login(alice)
    body = client.get(reverse("operating_characteristic_data"), {"environment": environment.name}).json()
    assert body["strata"] == {
        "probe_model": "probe",
        "source": "declared difficulty",
        "outcome": "learned",
        "tables": 2,
        "cuts": [2.0],
    }
    assert body["learned"] is not None  # the tasks that declare nothing follow the table learned without it


def test_a_task_follows_the_table_its_results_under_another_model_pick(arithmetic, alice, settings):
    """Side information from another probe model (the item-response model on its counts): 48 failures
    band too_hard a task that never passed under the earlier model, and leave undecided one that
    nearly always did and one it never probed. The task's own results under the probe model never
    enter its score."""
    import_tasks(
        arithmetic,
        alice,
        *[math_task(f"t{index}", question=f"What is {index} + 3?", answer=str(index + 3)) for index in range(60)],
        *[math_task(key, question=f"What is 7 * {index}?", answer=str(7 * index)) for index, key in enumerate(PROBES)],
    )
    tasks = {task.key: task for task in arithmetic.tasks.all()}
    earlier = ProbeModel.objects.create(name="earlier", backend="openai", base_url="http://127.0.0.1:9/v1")
    probe = ProbeModel.objects.get_or_create(
        name="probe", defaults={"backend": "openai", "base_url": "http://127.0.0.1:9/v1"}
    )[0]
    background = [tasks[f"t{index}"] for index in range(60)]
    calibrate_extremes(background, probe)
    calibrate_extremes(
        [*background[:30], tasks["never-before"], *background[30:], tasks["nearly-always-before"]], earlier
    )
    for key in PROBES:
        rollouts_with(tasks[key], alice, ["fail"] * 48)
    settings.PASSBAND_LEARNED_MIN_TASKS = 50
    calibrations = services.calibrations_refresh(
        task_versions=[tasks[key].current_version for key in PROBES],
        probe_model=probe,
        policies={tasks[key].current_version_id: ADAPTIVE for key in PROBES},
    )
    band = {key: calibrations[tasks[key].current_version_id] for key in PROBES}
    assert (band["never-before"].band, band["never-before"].decided) == ("too_hard", True)
    assert band["nearly-always-before"].band == "undecided" and band["not-probed-before"].band == "undecided"
    learning = services.environment_learning(
        environment=arithmetic, probe_model=probe, policy=sampling_policy(ADAPTIVE, attempts=0)
    )
    assert learning is not None and learning.strata_source == "other probe models"
    assert learning.tables is not None and tasks["not-probed-before"].current_version_id not in learning.tables.scores


PROBES = ("never-before", "nearly-always-before", "not-probed-before")


def test_strata_are_kept_only_where_they_are_predicted_cheaper_than_the_table_without_them():
    """The same strata that learn against the rule's cost are refused against a cheaper baseline, and
    the entry says what each was predicted to spend."""
    from calibration.services import side_information

    rows = [(index, 0, 72) if index < 30 else (index, 40, 48) for index in range(60)]
    scores = {side_information.DECLARED: {index: -3.0 if index < 30 else -1.0 for index in range(60)}}
    arguments = {
        "rows": rows,
        "scores": scores,
        "thresholds": stats.Thresholds.with_default_zones(floor=0.02, retire_at=0.7),
        "policy": sampling_policy(ADAPTIVE, attempts=0),
        "seed": 1,
        "minimum": 50,
        "name": "extremes",
    }
    kept = side_information.strata_entry(**arguments, baseline=72.0)
    assert kept is not None and kept["reason"] == "learned" and len(kept["tables"]) == 2
    refused = side_information.strata_entry(**arguments, baseline=20.0)
    assert refused is not None and "tables" not in refused
    assert refused["reason"].startswith("the tables per stratum are predicted to spend")
    assert refused["reason"].endswith("no fewer than the 20.0 without side information")
    assert side_information.strata_entry(**{**arguments, "minimum": 61}, baseline=72.0) is None
