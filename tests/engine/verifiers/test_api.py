"""The public API: verify, validate_config, audit, Verdict, KINDS."""

import pytest

from engine.verifiers import (
    KINDS,
    Verdict,
    VerifierConfigError,
    audit,
    validate_config,
    verify,
)

HUMANEVAL_ADD = {
    "kind": "code",
    "style": "humaneval",
    "code_prefix": 'def add(a, b):\n    """Return a + b."""\n',
    "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(-1, 1) == 0\n",
    "entry_point": "add",
}


def test_kinds_lists_every_builtin_kind_first():
    assert set(KINDS[:13]) == {
        "exact",
        "regex",
        "numeric",
        "math",
        "code",
        "json",
        "tool_calls",
        "llm_judge",
        "state_check",
        "episode_reward",
        "reasoning_gym",
        "verifiers_reward",
        "repo_tests",
    }


def test_verdict_to_dict_has_the_four_fields():
    verdict = verify(verifier={"kind": "exact"}, completion="Paris", answer="Paris")
    assert isinstance(verdict, Verdict)
    assert verdict.to_dict() == {
        "outcome": "pass",
        "reward": 1.0,
        "detail": verdict.detail,
        "latency_ms": verdict.latency_ms,
    }
    assert verdict.latency_ms >= 0


def test_fail_has_reward_zero_and_a_detail():
    verdict = verify(verifier={"kind": "exact"}, completion="Lyon", answer="Paris")
    assert (verdict.outcome, verdict.reward) == ("fail", 0.0)
    assert "Lyon" in verdict.detail


def test_error_has_no_reward():
    verdict = verify(verifier={"kind": "numeric"}, completion="42", answer="not a number")
    assert verdict.outcome == "error"
    assert verdict.reward is None


def test_timeout_has_no_reward():
    config = {
        "kind": "code",
        "style": "asserts",
        "asserts": ["assert f() == 1"],
        "timeout_seconds": 1,
        "cpu_seconds": 1,
    }
    verdict = verify(verifier=config, completion="def f():\n    while True:\n        pass\n")
    assert verdict.outcome == "timeout"
    assert verdict.reward is None


@pytest.mark.parametrize(
    ("verifier", "field"),
    [
        ({"kind": "nope"}, "kind"),
        ({}, "kind"),
        ({"kind": "numeric", "abs_tol": -1}, "abs_tol"),
        ({"kind": "numeric", "abs_tol": "small"}, "abs_tol"),
        ({"kind": "exact", "ignorecase": True}, "ignorecase"),
        ({"kind": "exact", "whitespace": "squash"}, "whitespace"),
        ({"kind": "regex"}, "pattern"),
        ({"kind": "regex", "pattern": "("}, "pattern"),
        ({"kind": "code"}, "style"),
        ({"kind": "code", "style": "asserts", "asserts": []}, "asserts"),
        ({"kind": "code", "style": "asserts", "asserts": ["assert (("]}, "asserts[0]"),
        ({"kind": "code", "style": "humaneval", "test": "def check(c): pass"}, "entry_point"),
        ({"kind": "code", "style": "stdio", "cases": [{"input": "1"}]}, "cases[0]"),
        ({"kind": "code", "style": "asserts", "asserts": ["assert True"], "memory_mb": 1}, "memory_mb"),
        ({"kind": "json", "schema": {"type": "wat"}}, "schema"),
        ({"kind": "json", "expected": {"name": 1}}, "expected"),
        ({"kind": "tool_calls", "calls": [{"arguments": {}}]}, "calls"),
        ({"kind": "math", "timeout_seconds": 0}, "timeout_seconds"),
        ({"kind": "regex", "pattern": "(a)\\1"}, "pattern"),
        ({"kind": "regex", "pattern": "a(?=b)"}, "pattern"),
        ({"kind": "json", "schema": {"type": "string", "pattern": "(a)\\1"}}, "schema/pattern"),
        ({"kind": "llm_judge", "rubric": "r"}, "judge"),
        ({"kind": "llm_judge", "judge": "never-registered", "rubric": "r"}, "judge"),
        # A task cannot point a worker at an address or a secret: only registered judges.
        ({"kind": "llm_judge", "base_url": "http://169.254.169.254/v1", "model": "m", "rubric": "r"}, "judge"),
    ],
)
def test_validate_config_names_the_bad_field(verifier, field):
    with pytest.raises(VerifierConfigError) as raised:
        validate_config(verifier)
    assert raised.value.field == field
    assert str(raised.value).startswith(f"{field}: ")


def test_validate_config_accepts_good_configs():
    validate_config({"kind": "exact"})
    validate_config(HUMANEVAL_ADD)
    validate_config({"kind": "json", "schema": {"type": "object"}, "expected": {"/a": 1}})


def test_verify_rejects_a_non_mapping_verifier():
    with pytest.raises(VerifierConfigError):
        verify(verifier="math", completion="1")  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", ["exact", "numeric", "math"])
def test_a_kind_that_needs_the_answer_says_so(kind):
    with pytest.raises(VerifierConfigError) as raised:
        verify(verifier={"kind": kind}, completion="1", answer=None)
    assert raised.value.field == "answer"


WEIRD_COMPLETIONS = [
    "",
    "   ",
    "\x00\x01",
    "🙂" * 1000,
    [],
    {},
    [{"role": "user", "content": "hi"}],
    {"role": "assistant", "content": None},
    [1, 2, 3],
    {"unexpected": ["shape"]},
]


@pytest.mark.parametrize(
    ("verifier", "answer"),
    [
        ({"kind": "exact", "extract": "boxed"}, "x"),
        ({"kind": "regex", "pattern": "a+"}, None),
        ({"kind": "numeric"}, "3"),
        ({"kind": "math"}, "3"),
        ({"kind": "json", "schema": {"type": "object"}}, None),
        ({"kind": "tool_calls", "calls": [{"name": "f", "arguments": {}}]}, None),
        ({"kind": "code", "style": "asserts", "asserts": ["assert f() == 1"]}, None),
    ],
)
def test_verify_never_raises_for_a_bad_completion(verifier, answer):
    for completion in WEIRD_COMPLETIONS:
        verdict = verify(verifier=verifier, completion=completion, answer=answer)
        assert verdict.outcome in ("fail", "error", "pass")
        assert verdict.detail


def test_chat_messages_are_read_from_the_last_assistant_turn():
    messages = [
        {"role": "user", "content": "Capital of France?"},
        {"role": "assistant", "content": "Lyon"},
        {"role": "user", "content": "Sure?"},
        {"role": "assistant", "content": [{"type": "text", "text": "Paris"}]},
    ]
    assert verify(verifier={"kind": "exact"}, completion=messages, answer="Paris").outcome == "pass"


def test_audit_passes_a_sound_task():
    assert audit(verifier=HUMANEVAL_ADD, answer="    return a + b\n") == []
    assert audit(verifier={"kind": "numeric"}, answer="3/4") == []
    assert audit(verifier={"kind": "math"}, answer="x^2+1") == []
    assert audit(verifier={"kind": "exact"}, answer="Paris") == []


def test_audit_reports_a_reference_answer_that_fails():
    problems = audit(verifier=HUMANEVAL_ADD, answer="    return a - b\n")
    assert len(problems) == 1
    assert "reference answer does not pass" in problems[0]


def test_audit_reports_a_verifier_that_passes_empty_completions():
    problems = audit(verifier={"kind": "regex", "pattern": ".*"}, answer="anything")
    assert problems == ["an empty completion should fail but gave pass (fullmatch '')"]


def test_audit_reports_tests_that_stubs_pass():
    weak = dict(HUMANEVAL_ADD, test="def check(candidate):\n    candidate(1, 2)\n")
    problems = audit(verifier=weak, answer="    return a + b\n")
    assert any("stub body `pass`" in problem for problem in problems)
    assert any("stub body `return None`" in problem for problem in problems)


def test_audit_stubs_whole_programs_for_asserts_style():
    weak = {"kind": "code", "style": "asserts", "asserts": ["assert f(1) is None or True"]}
    problems = audit(verifier=weak, answer="def f(x):\n    return x + 1\n")
    assert any("stub `pass` bodies" in problem for problem in problems)


def test_audit_reports_a_bad_config_and_a_missing_answer():
    assert audit(verifier={"kind": "numeric", "rel_tol": -1}, answer="1") == [
        "verifier config: rel_tol: must be a number >= 0, got -1"
    ]
    assert audit(verifier={"kind": "regex", "pattern": "a+"}, answer=None) == [
        "no reference answer: nothing shows that this verifier can pass"
    ]
    problems = audit(verifier={"kind": "math"}, answer=None)
    assert any("answer" in problem for problem in problems)


def test_the_package_does_not_import_django():
    import subprocess
    import sys

    code = (
        "import sys; import engine.verifiers as v; "
        "v.verify(verifier={'kind': 'exact'}, completion='a', answer='a'); "
        "print(any(name == 'django' or name.startswith('django.') for name in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=_repo_root())
    assert result.stdout.strip() == "False"


def _repo_root():
    from pathlib import Path

    return Path(__file__).resolve().parents[3]
