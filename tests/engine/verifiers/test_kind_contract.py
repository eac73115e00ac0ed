"""The contract every registered verifier kind meets, Passband's own and installed ones alike (the installed
`word_count` of tests/plugins/passband-example-verifier among them): its traits are well formed, and each of
its examples parses, passes its passing completion, fails its failing one, and passes the audit."""

import pytest

from engine import verifiers
from engine.verifiers.kind import GAMEABILITY_BATTERIES, kind_problems
from engine.verifiers.registry import BUILTIN_KINDS, kind_registry

ENTRIES = kind_registry().entries()
EXAMPLES = [
    pytest.param(entry.kind, example, id=f"{entry.kind.name}-{index}")
    for entry in ENTRIES
    for index, example in enumerate(entry.kind.examples)
]


def test_the_builtins_come_first_and_the_example_package_is_installed():
    names = verifiers.KINDS
    assert names[: len(BUILTIN_KINDS)] == BUILTIN_KINDS
    assert "word_count" in names, f"run make install (refused: {kind_registry().refused()})"
    assert kind_registry().entry("word_count").distribution == "passband-example-verifier"


@pytest.mark.parametrize("entry", ENTRIES, ids=[entry.kind.name for entry in ENTRIES])
def test_traits_are_well_formed(entry):
    kind = entry.kind
    assert kind_problems(kind) == []
    assert verifiers.kind_of({"kind": kind.name}) is kind
    assert kind.gameability in GAMEABILITY_BATTERIES
    assert kind.exports is not None, "every kind here declares how it exports"
    if not entry.builtin:
        assert kind.examples, "an installed kind must bring its own examples"
        assert kind.exports.package == entry.distribution


@pytest.mark.parametrize(("kind", "example"), EXAMPLES)
def test_each_example_parses_passes_fails_and_audits(kind, example):
    verifier = dict(example.verifier)
    verifiers.validate_config(verifier)
    passing = verifiers.verify(
        verifier=verifier, completion=example.passing, answer=example.answer, prompt=example.prompt
    )
    assert (passing.outcome, passing.reward) == ("pass", 1.0), passing.detail
    failing = verifiers.verify(
        verifier=verifier, completion=example.failing, answer=example.answer, prompt=example.prompt
    )
    assert (failing.outcome, failing.reward) == ("fail", 0.0), failing.detail
    assert verifiers.audit(verifier=verifier, answer=example.answer, prompt=example.prompt) == []


@pytest.mark.parametrize("entry", ENTRIES, ids=[entry.kind.name for entry in ENTRIES])
def test_an_unknown_field_is_named(entry):
    if not entry.kind.examples:
        pytest.skip(entry.kind.examples_unavailable)
    verifier = {**entry.kind.examples[0].verifier, "no_such_field": 1}
    with pytest.raises(verifiers.VerifierConfigError) as raised:
        verifiers.validate_config(verifier)
    assert raised.value.field == "no_such_field"


@pytest.mark.parametrize("entry", ENTRIES, ids=[entry.kind.name for entry in ENTRIES])
def test_an_oversized_completion_fails_before_the_kind_reads_it(entry):
    if not entry.kind.examples:
        pytest.skip(entry.kind.examples_unavailable)
    example = entry.kind.examples[0]
    huge = "word " * (verifiers.max_completion_chars() // 5 + 1)
    verdict = verifiers.verify(verifier=dict(example.verifier), completion=huge, answer=example.answer)
    assert verdict.outcome == "fail" and "over the limit" in verdict.detail
