"""An installed world provider's code runs out of process (engine/worlds/isolated.py): the registry hands out a
proxy whose ``claims``, ``prepare`` and worlds live in locked-down helper processes, one per episode. From inside
an episode a hostile provider (tests/support/hostile_worlds.py) cannot write a file outside, open a socket or
read the worker's secrets; a world whose process dies mid-episode is the world's failure; a package the helper
cannot load is WorldMissing. Passband's own providers stay in this process."""

import json
import os
from importlib import metadata

import pytest

from engine.worlds import registry
from engine.worlds.isolated import isolated
from engine.worlds.provider import WorldFailed, WorldMissing, WorldOptions
from engine.worlds.providers import plugin as plugin_provider
from tests.support import hostile_worlds

HOSTILE = "tests.support.hostile_worlds"


@pytest.fixture(scope="module")
def hostile():
    built = registry.build(
        [
            metadata.EntryPoint(name=name, value=f"{HOSTILE}:{attribute}", group=registry.GROUP)
            for name, attribute in (("hostile", "PROVIDER"), ("loud-claims", "LOUD_CLAIMS"))
        ]
    )
    return built.get("hostile"), built


@pytest.fixture(autouse=True)
def no_marker():
    if os.path.exists(hostile_worlds.MARKER):
        os.remove(hostile_worlds.MARKER)
    yield
    assert not os.path.exists(hostile_worlds.MARKER), "a hostile provider wrote outside its helper"


def test_installed_providers_are_proxies_and_builtins_stay_in_process(hostile):
    provider, built = hostile
    assert provider.claims is not hostile_worlds.claims and provider.prepare is not hostile_worlds.prepare
    assert provider.examples == hostile_worlds.PROVIDER.examples  # the declaration is kept as loaded
    assert built.get("plugin").prepare is plugin_provider.prepare


def test_claims_runs_in_a_helper_where_acting_on_the_host_is_refused(hostile):
    provider, built = hostile
    loud = built.get("loud-claims")
    with pytest.raises(RuntimeError, match="did not say whether it claims"):
        loud.claims(hostile_worlds.EXAMPLE)  # its write was refused in the helper: a crash, never a claim
    assert provider.claims(hostile_worlds.EXAMPLE)


def test_from_inside_an_episode_the_world_cannot_write_connect_or_read_the_workers_secrets(hostile, monkeypatch):
    monkeypatch.setenv("SECRET_KEY", "the-workers-own-secret")  # the helper is started after this
    provider, _ = hostile
    worlds = provider.prepare(hostile_worlds.EXAMPLE, WorldOptions(tool_seconds=5.0))
    with worlds.episode(seed=1) as opened:
        world = opened.world
        assert world.call("hostile_write", {}).content.startswith("refused: Forbidden: writing files")
        assert world.call("hostile_socket", {}).content.startswith("refused: Forbidden: socket")
        secrets = json.loads(world.call("hostile_secrets", {}).content)
        assert not {"SECRET_KEY", "DATABASE_URL", "CELERY_BROKER_URL"} & set(secrets["environ"])
        assert secrets["parent"].startswith("refused: Forbidden: reading another process's /proc")
        assert "the-workers-own-secret" not in json.dumps(world.state())
        assert world.call("hostile_count", {}).content == json.dumps({"count": 1})
        assert world.state()["count"] == 1


def test_a_world_whose_process_dies_mid_episode_is_the_worlds_failure(hostile):
    provider, _ = hostile
    worlds = provider.prepare(hostile_worlds.EXAMPLE, WorldOptions(tool_seconds=5.0))
    with worlds.episode(seed=1) as opened:
        # A tool that raises is that call's observation; the world goes on.
        raised = opened.world.call("hostile_raise", {})
        assert raised.status == "tool_error" and "RuntimeError: the world broke" in raised.content
        assert opened.world.call("hostile_count", {}).status == "ok"
        with pytest.raises(WorldFailed, match="world hostile: its helper process died during hostile_crash"):
            opened.world.call("hostile_crash", {})
        with pytest.raises(RuntimeError, match="could not read the world's state"):
            opened.world.state()
    # The next episode has a world of its own, from the start.
    with worlds.episode(seed=2) as opened:
        assert opened.world.call("hostile_count", {}).content == json.dumps({"count": 1})


def test_a_tool_past_its_deadline_is_a_timeout_and_ends_the_world(hostile):
    provider, _ = hostile
    worlds = provider.prepare(hostile_worlds.EXAMPLE, WorldOptions(tool_seconds=0.5))
    with worlds.episode(seed=1) as opened:
        assert opened.world.call("hostile_hang", {}).status == "timeout"
        with pytest.raises(WorldFailed, match="a tool call timed out"):
            opened.world.call("hostile_count", {})


def test_a_package_its_helper_cannot_load_is_world_missing():
    provider = isolated(hostile_worlds.PROVIDER, source="passband_world_uninstalled_long_ago:PROVIDER")
    with pytest.raises(WorldMissing, match="provider hostile could not be loaded in its helper process"):
        provider.prepare(hostile_worlds.EXAMPLE, WorldOptions())
