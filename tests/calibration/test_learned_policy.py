"""The adaptive policy probes with a table learned from the environment's own population once it has
enough tasks with evidence (calibration.services.environment_learned_table)."""

import pytest
from django.urls import reverse

from calibration import services
from calibration.models import Calibration, Campaign, ProbeModel, Rollout
from calibration.services.calibrations import sampling_policy, thresholds_for
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
    Calibration.objects.bulk_create(
        Calibration(
            task_version=tasks[f"t{index}"].current_version,
            probe_model=model,
            attempts=72 if index <= 30 else 48,
            successes=0 if index <= 30 else 40,
            band="too_hard" if index <= 30 else "retire",
            decided=True,
        )
        for index in range(1, 61)
    )
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
        Calibration.objects.bulk_create(
            Calibration(
                task_version=arithmetic.tasks.get(key=f"background-{index}").current_version,
                probe_model=model,
                attempts=72 if index < 30 else 48,
                successes=0 if index < 30 else 40,
                band="too_hard" if index < 30 else "retire",
                decided=True,
            )
            for index in range(60)
        )
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
    tables = services.calibrations._environment_learned_tables(
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
