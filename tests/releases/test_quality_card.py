"""The quality card (engine/quality_card.py, docs/quality-card.md): built by one selector, carried by every export
and served by the API. Each export's card is read with the format's own library (🤗 datasets for the Hub folder and
Parquet, tomllib for Harbor's task.toml, NeMo Gym's JSONL, the OpenEnv and verifiers readers) and validated against
the schema with jsonschema."""

import io
import json
import tomllib

import jsonschema
import pytest
from django.core.management import call_command

from accounts.services import api_token_create
from calibration.models import Calibration, ProbeModel
from curation.models import Task
from curation.services import environment_create
from engine import quality_card
from engine.integrations.openenv_env import PassbandEnvironment
from engine.integrations.release import read_release
from releases import services as releases
from releases import tasks
from releases.hub import release_hub_folder
from releases.nemo_gym_folder import release_nemo_gym_folder
from releases.quality_cards import quality_card_of
from releases.records import release_records
from review.models import Review
from similarity.models import SimilarityFlag
from tests.factories import import_tasks
from tests.releases.export_data import calibrated_environment

pytestmark = pytest.mark.django_db


def check(card) -> dict:
    """The card meets the schema, checked by jsonschema itself (not only by engine.quality_card.validate)."""
    card = json.loads(card) if isinstance(card, str) else card
    jsonschema.Draft202012Validator(quality_card.schema(), format_checker=jsonschema.FormatChecker()).validate(card)
    return card


@pytest.fixture
def evidence(arithmetic, alice, bob, settings, tmp_path):
    """calibrated_environment plus evidence of each kind on `sum` and `product`: a checkpoint's calibration, a
    review, a gameability finding with a reviewer's override, and an open contamination flag."""
    settings.MEDIA_ROOT = tmp_path / "media"
    model = calibrated_environment(arithmetic, alice)
    checkpoint = ProbeModel.objects.create(
        name="run-a-100", backend="transformers", model="tiny", run="run-a", checkpoint_step=100
    )
    product = arithmetic.tasks.get(key="product").current_version
    summed = arithmetic.tasks.get(key="sum").current_version
    Calibration.objects.create(
        task_version=summed, probe_model=checkpoint, attempts=16, successes=9, pass_rate=0.56, interval_low=0.33,
        interval_high=0.77, band="in_band", decided=True, cost_usd="0.25",
        policy={"kind": "adaptive", "round_size": 8, "max_rollouts": 64, "confidence": 0.9},
    )  # fmt: skip
    Review.objects.create(task=summed.task, task_version=summed, reviewer=bob, decision="approve")
    type(summed).objects.filter(pk=summed.pk).update(
        gameable=True,
        gameability_findings=[{"label": "hedge", "expected": "no_reward", "outcome": "pass", "detail": "", "completion": "5 or 6"}],
        gameable_override_reason="the hedge is the only answer", gameable_override_by=bob, gameable_override_at=summed.created_at,
        audit_passed=True,
    )  # fmt: skip
    SimilarityFlag.objects.create(
        task_version=product, kind="contaminated", reference_source="gsm8k", reference_item="test/12"
    )
    return model


def test_the_card_of_a_version_holds_each_kind_of_evidence(arithmetic, evidence, alice):
    summed = arithmetic.tasks.get(key="sum").current_version
    card = check(quality_card_of(version=summed))
    assert card["task"] == {
        "key": "sum", "environment": "arithmetic", "version": 1, "content_hash": summed.content_hash, "status": "approved"
    }  # fmt: skip
    by_model = {row["probe_model"]: row for row in card["calibrations"]}
    assert set(by_model) == {"probe", "run-a-100"}
    checkpoint = by_model["run-a-100"]
    assert (checkpoint["run"], checkpoint["checkpoint_step"], checkpoint["attempts"], checkpoint["band"]) == (
        "run-a", 100, 16, "in_band"
    )  # fmt: skip
    assert checkpoint["rule"] == {
        "policy": "adaptive", "confidence": 0.9, "round_size": 8, "max_rollouts": 64, "floor": arithmetic.floor,
        "retire_at": arithmetic.retire_at,
    }  # fmt: skip
    assert checkpoint["interval"] == [0.33, 0.77] and by_model["probe"]["successes"] == 3
    assert card["verifier"]["kind"] == "math" and card["verifier"]["prompt_version"] is None
    assert card["audit"]["status"] == "passed"
    assert card["gameability"]["status"] == "gameable" and card["gameability"]["findings"] == ["hedge"]
    assert card["gameability"]["override"]["by"] == "bob"
    assert card["impossible_variants"] == {"status": "not_run"} and card["weak_tests"] == {"status": "not_run"}
    assert [(d["decision"], d["reviewer"]) for d in card["review"]["decisions"]] == [("approve", "bob")]
    assert card["cost"]["probing_usd"] == "0.25"
    assert card["provenance"]["author"] == "alice" and card["provenance"]["release"] is None
    product = check(quality_card_of(version=arithmetic.tasks.get(key="product").current_version))
    assert product["similarity"]["contamination"] == {"open": 1, "resolved": 0, "sources": ["gsm8k:test/12"]}
    assert product["review"]["decisions"] == [] and product["gameability"]["status"] == "not_run"


def test_a_broken_card_is_refused_naming_the_field(arithmetic, evidence):
    card = quality_card_of(version=arithmetic.tasks.get(key="sum").current_version)
    card["calibrations"][0]["band"] = "easy"
    with pytest.raises(quality_card.QualityCardError, match=r"calibrations/0/band"):
        quality_card.validate(card)
    del card["provenance"]
    with pytest.raises(quality_card.QualityCardError, match="provenance"):
        quality_card.validate(json.dumps(card))


def built_release(arithmetic, charlie, model):
    release = releases.release_create(user=charlie, probe_model=model, environment=arithmetic)
    assert tasks.build_release(release.pk) == "ready"
    release.refresh_from_db()
    return release


def test_every_release_file_and_folder_carries_a_valid_card(arithmetic, evidence, charlie, tmp_path):
    import datasets

    release = built_release(arithmetic, charlie, evidence)
    summary = release.manifest["quality_cards"]
    assert summary["tasks"] == 2 and summary["schema"] == quality_card.schema_id()
    assert summary["gameability"] == {"gameable": 1, "not_run": 1} and summary["open_contamination"] == 1
    assert summary["impossible_variants"] == {"not_run": 2}
    cache = str(tmp_path / "cache")
    for format in ("native", "trl", "verifiers", "nemo_gym"):
        for file_type in ("jsonl", "parquet"):
            path = releases.release_file_path(release=release, format=format, file_type=file_type)
            if file_type == "parquet":
                column = datasets.load_dataset("parquet", data_files=str(path), cache_dir=cache)["train"][
                    "quality_card"
                ]
            else:
                column = [json.loads(line)["quality_card"] for line in path.read_text().splitlines()]
            cards = [check(card) for card in column]
            assert {card["task"]["key"] for card in cards} == {"sum", "product"}, (format, file_type)
            assert {card["provenance"]["release"] for card in cards} == {release.pk}
            # The trainer integrations read it from any file: verifiers' taskset and OpenEnv's observation.
            read = read_release(path)
            assert {task.task_key: check(task.quality_card)["task"]["key"] for task in read} == {
                "sum": "sum",
                "product": "product",
            }
    observation = PassbandEnvironment(read_release(path)).reset(seed=0)
    assert check(observation.quality_card)["task"]["key"] == observation.task_id.split("@")[0]

    hub = release_hub_folder(release=release, folder=tmp_path / "hub")
    native = datasets.load_dataset(str(hub), "native", split="train", cache_dir=cache)
    assert all(check(card)["provenance"]["release"] == release.pk for card in native["quality_card"])
    readme = (hub / "README.md").read_text()
    assert "## Quality cards" in readme, readme
    assert "Gameability: gameable 1, not_run 1" in readme, readme
    assert json.loads((hub / quality_card.SCHEMA_PATH.name).read_text())["$id"] == quality_card.schema_id()

    gym = release_nemo_gym_folder(release=release, folder=tmp_path / "gym")
    rows = (
        (gym / "resources_servers" / f"passband_release_{release.pk}" / "data" / "train.jsonl").read_text().splitlines()
    )
    assert {check(json.loads(row)["quality_card"])["task"]["key"] for row in rows} == {"sum", "product"}
    assert (gym / quality_card.SCHEMA_PATH.name).exists()
    assert json.loads((gym / "manifest.json").read_text())["quality_cards"] == summary


def test_a_release_keeps_the_card_it_was_pinned_with(arithmetic, evidence, charlie, bob):
    release = built_release(arithmetic, charlie, evidence)
    product = arithmetic.tasks.get(key="product")
    Review.objects.create(task=product, task_version=product.current_version, reviewer=bob, decision="reject")
    pinned = [row["quality_card"] for row in release_records(release=release) if row["task_key"] == "product"]
    assert pinned[0]["review"]["decisions"] == []
    assert quality_card_of(version=product.current_version)["review"]["decisions"][0]["decision"] == "reject"
    assert quality_card_of(version=product.current_version)["provenance"]["releases"] == [release.pk]


def test_the_export_command_carries_cards(arithmetic, evidence, tmp_path):
    out = tmp_path / "native.jsonl"
    call_command("export", format="native", model="probe", environment="arithmetic", output=out, stdout=io.StringIO())
    cards = [check(json.loads(line)["quality_card"]) for line in out.read_text().splitlines()]
    assert len(cards) == arithmetic.tasks.count()


def test_harbor_task_toml_carries_the_card(alice, tmp_path, settings):
    settings.MEDIA_ROOT = tmp_path / "media"
    environment = environment_create(name="code", domain="code")
    task = {
        "key": "add",
        "prompt": "Write add(a, b).",
        "answer": "def add(a, b):\n    return a + b\n",
        "verifier": {"kind": "code", "style": "asserts", "asserts": ["assert add(1, 2) == 3"]},
    }
    import_tasks(environment, alice, task)
    call_command("export_harbor", environment="code", out=str(tmp_path / "harbor"))
    config = tomllib.loads((tmp_path / "harbor" / "add" / "task.toml").read_text())
    card = check(config["metadata"]["quality_card"])
    assert card["task"]["key"] == "add" and card["verifier"]["kind"] == "code"
    assert config["metadata"]["passband_verifier"] == "code" and config["verifier"]["timeout_sec"] > 0


def test_the_api_serves_a_card_only_to_those_who_may_see_the_task(
    client, arithmetic, evidence, alice, django_user_model
):
    from tests.conftest import make_user

    secret = api_token_create(user=alice, name="mine", scopes=["read"])[1]
    url = "/api/v1/tasks/arithmetic/sum/versions/1/quality-card"
    response = client.get(url, HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert response.status_code == 200, response.content
    assert check(response.json())["task"]["key"] == "sum"
    assert client.get(url.replace("/1/", "/2/"), HTTP_AUTHORIZATION=f"Bearer {secret}").status_code == 404
    assert client.get(url).status_code in (401, 403)
    # Another author may not see alice's draft, nor its card.
    dave = make_user(django_user_model, "dave", "authors")
    other = api_token_create(user=dave, name="other", scopes=["read"])[1]
    Task.objects.filter(environment=arithmetic, key="sum").update(status="draft")
    assert client.get(url, HTTP_AUTHORIZATION=f"Bearer {other}").status_code == 404
    assert client.get(url, HTTP_AUTHORIZATION=f"Bearer {secret}").status_code == 200
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    assert "/api/v1/tasks/{environment_name}/{key}/versions/{number}/quality-card" in schema["paths"]
