"""The contract every registered world provider meets, Passband's own and installed ones alike (the installed
`lights` of tests/plugins/passband-example-world among them): it is well formed, claims its own examples (and
no provider ahead of it takes them), and each example's world opens, answers its tool call and shows its
state. The registry keeps the built-ins whatever an installed package declares."""

from importlib import metadata

import pytest

from engine.repo_tasks import snapshots
from engine.worlds import registry
from engine.worlds.provider import WorldMissing, WorldOptions, WorldTask, provider_problems
from tests.engine.repo_tasks.tiny_repo import FILES, SNAPSHOT, tiny_row

ENTRIES = registry.provider_registry().entries()
EXAMPLES = [
    pytest.param(entry.item, example, id=f"{entry.item.name}-{index}")
    for entry in ENTRIES
    for index, example in enumerate(entry.item.examples)
]


def test_the_builtins_come_first_in_their_order_and_the_example_package_is_installed():
    assert registry.provider_registry().names()[:4] == ("mcp", "openenv", "repository", "plugin")
    assert all(entry.builtin for entry in ENTRIES[:4])
    lights = registry.provider_registry().entry("lights")
    assert lights is not None, f"run make install (refused: {registry.errors()})"
    assert lights.distribution == "passband-example-world"


@pytest.mark.parametrize("entry", ENTRIES, ids=[entry.item.name for entry in ENTRIES])
def test_each_provider_is_well_formed(entry):
    provider = entry.item
    assert provider_problems(provider) == []
    assert provider.examples or provider.examples_unavailable
    if not entry.builtin:
        assert provider.examples, "an installed provider must bring its own examples"


def _open_and_call(provider, example):
    worlds = provider.prepare(example.task, WorldOptions(tool_seconds=10.0))
    assert isinstance(worlds.name, str) and worlds.name
    with worlds.episode(seed=1) as opened:
        name, arguments = example.call
        assert name in {tool["function"]["name"] for tool in opened.tools}, "the example's call must be offered"
        result = opened.world.call(name, dict(arguments))
        assert result.status == "ok", result.content
        assert isinstance(opened.world.state(), dict)
        assert opened.messages[: len(example.task.prompt)] == example.task.prompt
        return opened


@pytest.mark.parametrize(("provider", "example"), EXAMPLES)
def test_each_example_is_claimed_opens_and_answers_its_call(provider, example):
    assert provider.claims(example.task)
    assert registry.provider_for(example.task) is provider, "a provider ahead of it claims its example"
    _open_and_call(provider, example)


@pytest.fixture
def snapshot_store():
    """configure_store for the test; the process's own store is back afterwards."""
    previous = snapshots._store.get("loader")
    yield snapshots.configure_store
    if previous is not None:
        snapshots.configure_store(previous)
    else:
        snapshots._store.pop("loader", None)


def test_the_repository_provider_opens_a_fresh_copy_per_episode(snapshot_store):
    row = tiny_row(snapshots.digest_of(SNAPSHOT))
    tools = [{"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}]
    task = WorldTask(prompt=[{"role": "user", "content": row["prompt"]}], tools=tools, verifier=row["verifier"])
    provider = registry.provider_registry().get("repository")
    assert registry.provider_for(task) is provider
    snapshot_store(lambda digest: SNAPSHOT)
    worlds = provider.prepare(task, WorldOptions())
    with worlds.episode(seed=1) as first:
        first.world.call("write_file", {"path": "README.md", "content": "changed\n"})
        assert first.world.state()["files_changed"] == ["README.md"]
    with worlds.episode(seed=2) as second:
        assert FILES["README.md"].strip() in second.world.call("read_file", {"path": "README.md"}).content


def test_a_worker_that_cannot_read_the_snapshot_cannot_give_the_world(snapshot_store):
    row = tiny_row(snapshots.digest_of(SNAPSHOT))
    tools = [{"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}]
    task = WorldTask(prompt=[{"role": "user", "content": row["prompt"]}], tools=tools, verifier=row["verifier"])

    def storage_down(digest):
        raise OSError("storage is down")

    snapshot_store(storage_down)
    with pytest.raises(WorldMissing) as missing:
        registry.provider_registry().get("repository").prepare(task, WorldOptions())
    assert missing.value.world == "repository" and "storage is down" in str(missing.value)


def test_a_task_that_is_not_an_episode_has_no_provider():
    plain = WorldTask(prompt=[{"role": "user", "content": "2+2?"}], tools=[], verifier={"kind": "exact"})
    assert registry.provider_for(plain) is None


def _entry_point(name, value):
    return metadata.EntryPoint(name=name, value=value, group=registry.GROUP)


def test_a_stale_or_hostile_package_never_loses_a_builtin():
    built = registry.build(
        [
            _entry_point("plugin", "engine.worlds.providers.plugin:PROVIDER"),  # a built-in's name, taken again
            _entry_point("gone", "passband_uninstalled_package:PROVIDER"),  # metadata left by an uninstall
            _entry_point("odd", "engine.worlds.provider:NAME_PATTERN"),  # not a provider
            _entry_point("backoffice", "engine.episodes.backoffice"),  # a tool-environment plug-in: not refused
        ]
    )
    assert built.names() == ("mcp", "openenv", "repository", "plugin")
    refused = {item.name: item.error for item in built.refused()}
    assert set(refused) == {"plugin", "gone", "odd"}
    assert "one of Passband's own" in refused["plugin"]
    assert "importing passband_uninstalled_package:PROVIDER failed" in refused["gone"]
    assert "not an engine.worlds.provider.WorldProvider" in refused["odd"]
