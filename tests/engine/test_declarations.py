"""An installed package is never imported in the calling process to read what it declares
(engine/declarations.py): the hostile package of tests/support/hostile_import.py, whose module-level code tries
to read the importing process's secrets, write a file, open a socket, start a process and mark the importing
interpreter, is declared as a world provider and a verifier kind; the registries register both from a locked-down
helper's answer, where every attempt is refused, and this process never imports it. Declarations are read once
per process and distribution version."""

import builtins
import json
import os
import sys
from importlib import metadata

import pytest

from engine import declarations
from engine.episodes import plugins
from engine.verifiers import base
from engine.verifiers import registry as kinds
from engine.worlds import registry as worlds
from engine.worlds.provider import WorldOptions

HOSTILE = "tests.support.hostile_import"
MARKER = "/tmp/passband-hostile-import-ran"
INSISTS_MARKER = "/tmp/passband-hostile-import-insisted"
MARK = "__passband_hostile_import_ran_in__"


def provider_point(value=f"{HOSTILE}:PROVIDER", name="hostile-import"):
    return metadata.EntryPoint(name=name, value=value, group=worlds.GROUP)


def kind_point():
    return metadata.EntryPoint(name="hostile_import", value=f"{HOSTILE}:KIND", group=kinds.GROUP)


def never_imported_here():
    assert HOSTILE not in sys.modules and "tests.support.hostile_import_insists" not in sys.modules
    assert not hasattr(builtins, MARK)
    assert not os.path.exists(MARKER) and not os.path.exists(INSISTS_MARKER)


@pytest.fixture
def fresh():
    for marker in (MARKER, INSISTS_MARKER):
        if os.path.exists(marker):
            os.remove(marker)
    declarations.forget()
    yield
    declarations.forget()


def test_the_registries_register_a_hostile_package_from_its_helpers_declaration_and_never_import_it(fresh):
    built_kinds = kinds.build([kind_point()])
    built_worlds = worlds.build([provider_point()])
    never_imported_here()

    kind = built_kinds.get("hostile_import")
    assert kind is not None and not built_kinds.refused()
    assert (kind.version, kind.check_seconds, kind.check_many, kind.examples[0].passing) == ("3", 5.0, None, "ok")
    assert built_kinds.entry("hostile_import").source == f"{HOSTILE}:KIND"
    provider = built_worlds.get("hostile-import")
    assert provider is not None and not built_worlds.refused()
    assert (provider.version, provider.description) == ("2", "acts on whatever process imports it")
    assert provider.examples[0].call == ("import_report", {})

    # The hooks run in the package's own helpers, where its import ran locked down, with an empty environment.
    config = kind.parse_config({"kind": "hostile_import"})
    verdict = base.run_check(kind, config, completion="ok", answer=None, prompt=None, max_completion_chars=100)
    assert (verdict.outcome, verdict.detail) == (
        "pass",
        "secret:none parent:refused write:refused socket:refused process:refused",
    )
    example = provider.examples[0]
    assert provider.claims(example.task)
    with provider.prepare(example.task, WorldOptions()).episode(seed=1) as opened:
        report = json.loads(opened.world.call("import_report", {}).content)
    # Nothing of this process's environment: only the locale Python sets for itself in an empty one.
    assert report["secret_key"] == "" and set(report["environ"].split(",")) <= {"", "LC_CTYPE"}
    for attempt in ("parent", "write", "socket", "process"):
        assert report[attempt].startswith("refused: Forbidden"), report
    never_imported_here()


def test_tool_environment_discovery_passes_a_provider_by_without_importing_it(fresh):
    found = plugins.discover_from([provider_point()])
    assert not found.plugins and not found.refused
    never_imported_here()


def test_a_package_whose_import_insists_on_acting_is_refused_and_never_imported_here(fresh):
    insists = provider_point("tests.support.hostile_import_insists:PROVIDER", name="insists")
    built = worlds.build([insists])
    found = plugins.discover_from([insists])
    assert built.get("insists") is None
    (refused,) = built.refused()
    assert "Forbidden: writing files is not allowed" in refused.error
    assert [entry.name for entry in found.refused] == ["insists"] and not found.plugins
    never_imported_here()


def test_a_malformed_declaration_is_refused_with_what_is_wrong(fresh):
    built = kinds.build([metadata.EntryPoint(name="hostile_import", value=f"{HOSTILE}:PROVIDER", group=kinds.GROUP)])
    (refused,) = built.refused()
    assert refused.error == f"{HOSTILE}:PROVIDER is a WorldProvider, not an engine.verifiers.kind.VerifierKind"
    # What a helper answers is data the host checks field by field, whatever the package made its helper say.
    declared = declarations.declared(kinds.GROUP, kind_point())["kind"]
    assert declarations.kind_from(declared).name == "hostile_import"
    for field, value in (("check_seconds", "soon"), ("batchable", 1), ("examples", {"verifier": {}}), ("name", None)):
        with pytest.raises(declarations.DeclarationRefused, match=f"'{field}' is missing or malformed"):
            declarations.kind_from({**declared, field: value})
    with pytest.raises(declarations.DeclarationRefused, match="an example's call must be"):
        provider = declarations.declared(worlds.GROUP, provider_point())["provider"]
        declarations.provider_from({**provider, "examples": [{"task": provider["examples"][0]["task"], "call": [1]}]})
    never_imported_here()


def test_declarations_are_read_once_per_process_and_distribution_version(fresh, monkeypatch):
    asked = []
    ask = declarations._ask
    monkeypatch.setattr(declarations, "_ask", lambda group, value: asked.append(value) or ask(group, value))
    for _ in range(3):
        kinds.build([kind_point()])
        worlds.build([provider_point()])
        plugins.discover_from([provider_point()])
    assert sorted(asked) == [f"{HOSTILE}:KIND", f"{HOSTILE}:PROVIDER"]
    never_imported_here()
