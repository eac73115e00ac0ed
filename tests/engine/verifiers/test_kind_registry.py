"""The registry's door: a stale or malformed installed package is refused and reported, never fatal, and never
loses a built-in; an installed kind's code runs in a locked-down helper, where misbehaving is an `error` or a
`timeout`, never a verdict."""

import os
from importlib import metadata

import pytest

from engine.verifiers import base
from engine.verifiers.plugin_kinds import IsolatedConfig
from engine.verifiers.registry import BUILTIN_KINDS, GROUP, build, kind_registry
from tests.support import hostile_verifier_kinds as hostile_kinds

HOSTILE = "tests.support.hostile_verifier_kinds"


def points(**values):
    return [metadata.EntryPoint(name=name, value=value, group=GROUP) for name, value in values.items()]


def test_stale_and_malformed_packages_are_refused_and_the_builtins_stay():
    registry = build(
        points(
            gone="passband_package_uninstalled_long_ago:VERIFIER_KIND",
            dict_kind=f"{HOSTILE}:NOT_A_KIND",
            exact=f"{HOSTILE}:EXACT_AGAIN",
            misnamed=f"{HOSTILE}:CRASHES",
            crashes=f"{HOSTILE}:CRASHES",
        )
    )
    assert registry.names() == (*BUILTIN_KINDS, "crashes")
    refused = {entry.name: entry.error for entry in registry.refused()}
    assert set(refused) == {"gone", "dict_kind", "exact", "misnamed"}
    assert "ModuleNotFoundError" in refused["gone"]
    assert "not an engine.verifiers.kind.VerifierKind" in refused["dict_kind"]
    assert "one of Passband's own kinds" in refused["exact"]
    assert "named 'misnamed' but the kind 'crashes'" in refused["misnamed"]
    assert registry.get("exact") is kind_registry().get("exact")


@pytest.fixture(scope="module")
def hostile():
    registry = build(
        points(
            **{
                name: f"{HOSTILE}:{name.upper()}"
                for name in ("writes_a_file", "spawns", "crashes", "loops", "says_yes")
            }
        )
    )
    assert not registry.refused()
    return registry


def run(registry, name, completion="anything"):
    kind = registry.get(name)
    config = kind.parse_config({"kind": name})
    assert isinstance(config, IsolatedConfig)  # parsed in the helper, kept here as data
    return base.run_check(kind, config, completion=completion, answer=None, prompt=None, max_completion_chars=100)


@pytest.mark.parametrize("name", ["writes_a_file", "spawns"])
def test_a_kind_cannot_act_on_the_host(hostile, name):
    if os.path.exists(hostile_kinds.MARKER):
        os.remove(hostile_kinds.MARKER)
    verdict = run(hostile, name)
    assert (verdict.outcome, verdict.reward) == ("error", None)
    assert "not allowed while scoring" in verdict.detail
    assert not os.path.exists(hostile_kinds.MARKER)


def test_a_crash_is_an_error_and_a_bogus_answer_too(hostile):
    crashed = run(hostile, "crashes")
    assert (crashed.outcome, crashed.reward) == ("error", None) and "RuntimeError: boom" in crashed.detail
    bogus = run(hostile, "says_yes")
    assert (bogus.outcome, bogus.reward) == ("error", None) and "not a Check" in bogus.detail


def test_a_kind_that_never_answers_times_out_and_the_next_call_still_works(hostile):
    verdict = run(hostile, "loops")
    assert (verdict.outcome, verdict.reward) == ("timeout", None)
    assert run(hostile, "crashes").outcome == "error"


def test_the_size_limit_holds_before_an_installed_kind_sees_the_completion(hostile):
    verdict = run(hostile, "writes_a_file", completion="x" * 101)
    assert verdict.outcome == "fail" and "over the limit of 100" in verdict.detail
