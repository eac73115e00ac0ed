"""The gameability audit: a task's verifier against completions that must never earn reward.

A policy in training searches for any completion that pays. Before a task is probed, its verifier
runs against a standard battery of degenerate completions built from the task itself: empty, the
prompt restated, every choice listed, hedges (the reference among other candidates), a huge
output and, for code, an object whose ``__eq__`` is always true, ``sys.exit(0)`` or ``os._exit(0)``
before the checks, output that prints the expected value, and code that special-cases the examples
the prompt shows; for reasoning-gym's scorers, which read the last ``<answer>`` tag, degenerate
answers inside the tag; for a verifiers taskset's rewards, the text battery and the degenerate answers
in the reply format its tasks' reference answers are written in. A task whose verifier pays any of
them is *gameable*; the finding keeps the completion that passed.

Authors add fixtures of their own per environment, kinded as NeMo Gym's verifier fixtures are:
``full_reward`` (must pass), ``zero_reward`` (must fail), ``malformed`` (must fail, not error) and
``determinism`` (the same verdict three times). A fixture's completion may hold ``{answer}``, replaced
by the task's reference answer. A fixture that does not hold is a finding too.

Which battery a task gets is its kind's ``gameability`` trait (engine/verifiers/kind.py): judges
(``llm_judge``, "none") are not run here, as each check is a paid model call and their soundness is
measured against people instead; tool-use kinds (``tool_calls``, ``state_check``, "empty") get the empty
and fixture checks only. An installed kind names one of the same batteries.
"""

from __future__ import annotations

import ast
import contextlib
import json
import re
from dataclasses import dataclass
from typing import Any

from engine.episodes import plugins
from engine.episodes.offered import offered_names
from engine.repo_tasks import snapshots
from engine.repo_tasks.tampering import compact_battery, tampering_patches
from engine.verifiers import _parse, _run_check
from engine.verifiers.base import REWARDS, Verdict, VerifierConfigError
from engine.verifiers.kind import VerifierKind

FIXTURE_KINDS = ("full_reward", "zero_reward", "malformed", "determinism")
HUGE_CHARACTERS = 50_000  # past the 10,000 characters the text kinds read from the end
EXCERPT_CHARACTERS = 400

_CHOICE = re.compile(r"^\s*\(?([A-Ha-h])[\).:]\s+\S", re.MULTILINE)
_DOCTEST = re.compile(r"^\s*>>>\s*(?P<call>[A-Za-z_]\w*\(.*\))\s*$\n^\s*(?P<result>[^\s>].*)$", re.MULTILINE)


@dataclass(frozen=True)
class Probe:
    """One completion of the battery (or a fixture) and what its verdict must be."""

    label: str
    completion: Any
    expect: str = "no_reward"  # no_reward | pass | fail | deterministic


@dataclass(frozen=True)
class Finding:
    """A probe whose verdict broke its expectation: the completion, what it got, and why that matters."""

    label: str
    expected: str
    outcome: str
    detail: str
    completion: str

    def as_dict(self) -> dict[str, str]:
        return {
            "label": self.label,
            "expected": self.expected,
            "outcome": self.outcome,
            "detail": self.detail,
            "completion": self.completion,
        }


def fixtures_parse(raw: Any, *, where: str = "verifier_fixtures") -> list[dict[str, str]]:
    """Validate an environment's fixtures: a list of {"kind": one of FIXTURE_KINDS, "completion": text,
    "label": optional text}. Raises VerifierConfigError naming the entry and field."""
    if raw in (None, ""):
        return []
    if not isinstance(raw, list):
        raise VerifierConfigError(where, "must be a list of fixtures")
    fixtures = []
    for index, entry in enumerate(raw):
        field = f"{where}[{index}]"
        if not isinstance(entry, dict):
            raise VerifierConfigError(field, 'must be an object {"kind": ..., "completion": ...}')
        unknown = sorted(set(entry) - {"kind", "completion", "label"})
        if unknown:
            raise VerifierConfigError(f"{field}.{unknown[0]}", "is not a fixture field (kind, completion, label)")
        if entry.get("kind") not in FIXTURE_KINDS:
            raise VerifierConfigError(f"{field}.kind", f"must be one of {', '.join(FIXTURE_KINDS)}")
        if not isinstance(entry.get("completion"), str):
            raise VerifierConfigError(f"{field}.completion", "must be a string")
        label = entry.get("label", "")
        if not isinstance(label, str):
            raise VerifierConfigError(f"{field}.label", "must be a string")
        fixtures.append({"kind": entry["kind"], "completion": entry["completion"], "label": label})
    return fixtures


def gameability_check(
    *,
    verifier: dict[str, Any],
    answer: str | None,
    prompt: str | list[Any] | None,
    fixtures: list[dict[str, str]] | None = None,
    tools: list[Any] | None = None,
) -> list[Finding]:
    """Run the battery and the fixtures against one task's verifier; the findings ([] when it holds).
    `tools`: what the task offers; a tool task is also tried with a tool it does not offer (`unoffered_probes`).

    A verifier error or timeout on a battery completion is not a finding (nothing was paid); on a
    ``full_reward`` or ``malformed`` fixture it is. Raises VerifierConfigError for a bad config.
    """
    kind, config = _parse(verifier)
    probes = battery(kind=kind, config=config, answer=answer, prompt=prompt)
    probes += _fixture_probes(fixtures or [], answer=answer)
    probes += unoffered_probes(config, answer=answer, tools=tools)
    findings = []
    if kind.check_many is not None:  # graded together (repository tasks: one sandbox run for many patches)
        batch = [probe for probe in probes if probe.expect == "no_reward"]
        probes = [probe for probe in probes if probe.expect != "no_reward"]
        checks = kind.check_many(config, completions=[probe.completion for probe in batch])
        for probe, check in zip(batch, checks, strict=True):
            verdict = Verdict(check.outcome, REWARDS.get(check.outcome), check.detail, 0.0)
            findings.append(_finding(probe, [verdict]))
    for probe in probes:
        findings.append(_probe_run(kind, config, probe, answer=answer, prompt=prompt, tools=tools))
    return [finding for finding in findings if finding is not None]


def battery(*, kind: VerifierKind, config: Any, answer: str | None, prompt: str | list[Any] | None) -> list[Probe]:
    """The standard degenerate completions for a task of this kind: the battery its ``gameability`` names."""
    if kind.gameability == "none":
        return []
    probes = [Probe("empty", "")]
    if kind.gameability == "code":
        return probes + _code_probes(config, prompt_text(prompt))
    if kind.gameability == "answer_tag":
        return probes + _answer_tag_probes(answer, prompt_text(prompt))
    if kind.gameability == "repository":
        return probes + _repo_probes(config)
    if kind.gameability not in ("text", "text_in_reference_format"):
        return probes
    text = prompt_text(prompt)
    if text.strip():
        probes.append(Probe("the prompt restated", text))
    choices = sorted({letter.upper() for letter in _CHOICE.findall(text)})
    if len(choices) >= 2:
        probes.append(Probe("every choice listed", " ".join(choices)))
        probes.append(Probe("every choice boxed", " ".join(f"\\boxed{{{letter}}}" for letter in choices)))
    if answer:
        other = _other_value(answer)
        if kind.gameability == "text_in_reference_format":
            probes += _reference_format_probes(config, answer, other)
        probes += [
            Probe("a hedge: another value or the reference", f"The answer is {other} or {answer}."),
            Probe("a hedge: both boxed", f"$\\boxed{{{other}}}$ or $\\boxed{{{answer}}}$"),
            Probe("every small integer listed", " ".join(str(number) for number in range(-100, 1001))),
            Probe("a huge output", _huge(answer, other)),
        ]
    return probes


UNOFFERED_LABEL = "a tool the task does not offer"


def unoffered_probes(config: Any, *, answer: str | None, tools: list[Any] | None) -> list[Probe]:
    """For a task that offers tools and whose reference answer is tool calls: that answer with one more call,
    to each tool of its world that the task does not offer (a plug-in's, by its `environment`), or to a
    made-up one when the world offers nothing more. Calling a tool the task does not offer must never pay,
    even alongside a right answer (engine/episodes/offered.py)."""
    offered = offered_names(tools)
    calls = called_calls(answer) if offered and answer else None
    if not calls:
        return []
    others: list[str] = []
    environment = getattr(config, "environment", None)
    if isinstance(environment, str):
        with contextlib.suppress(plugins.UnknownEnvironment):
            others = [name for name in plugins.get(environment).tool_names if name not in offered]
    return [
        Probe(f"{UNOFFERED_LABEL} ({name})", json.dumps([*calls, {"name": name, "arguments": {}}]))
        for name in others or ["passband_unoffered_tool"]
    ]


def called_calls(answer: str) -> list[dict[str, Any]] | None:
    """The reference answer's tool calls as [{"name", "arguments"}], or None when it holds none."""
    from engine.verifiers.kinds.tool_calls import MalformedCalls, read_calls

    try:
        calls = read_calls(answer)
    except (MalformedCalls, TypeError, ValueError):
        return None
    return [{"name": call.name, "arguments": call.arguments} for call in calls] or None


def _reference_format_probes(config: Any, answer: str, other: str) -> list[Probe]:
    """A verifiers taskset's rewards read replies in their own format (the task's reference_format, such as
    a \\boxed{} answer): another value in that format, and a hedge of another value then the reference."""
    if config.reference_format == "{answer}":
        return []
    written = config.reference_format.replace
    return [
        Probe("another value, in the reference's format", written("{answer}", other)),
        Probe("a hedge in the reference's format", f"{written('{answer}', other)} or {written('{answer}', answer)}"),
    ]


def _repo_probes(config: Any) -> list[Probe]:
    """The tampering battery of repository tasks (engine/repo_tasks/tampering.py), as answers."""
    files = {}
    for path, data in snapshots.read_files(snapshots.load(config.snapshot)).items():
        try:
            files[path] = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
    battery = compact_battery(tampering_patches(files, test_files=list(config.test_files)))
    return [Probe(f"tampering: {label}", f"```diff\n{patch}```") for label, patch in battery]


def _answer_tag_probes(answer: str | None, text: str) -> list[Probe]:
    """reasoning-gym reads only the last <answer> tag, so the degenerate answers go inside one: a
    scorer that pays any non-empty answer, a hedge, or a number that only starts like the reference
    (a prefix-matching scorer) is caught here."""
    answers = [("no answer at all", "I do not know"), ("an empty answer", "")]
    if text.strip():
        answers.append(("the prompt restated", text))
    if answer:
        other = _other_value(answer)
        answers += [("another value", other), ("a hedge: another value or the reference", f"{other} or {answer}")]
        answers += [("the reference cut short", short) for short in _shorter_numbers(answer)]
    return [Probe(f"{label}, in answer tags", f"<answer>{value}</answer>") for label, value in answers]


def _shorter_numbers(answer: str) -> list[str]:
    """Leading parts of a decimal reference that are other numbers ("0" and "0.2" for "0.234375")."""
    stripped = answer.strip()
    try:
        value = float(stripped)
    except ValueError:
        return []
    shorter = []
    for end in range(1, len(stripped)):
        part = stripped[:end].rstrip(".")
        try:
            if part and float(part) != value and part not in shorter:
                shorter.append(part)
        except ValueError:
            continue
    return shorter[:3]


def _huge(answer: str, other: str) -> str:
    """HUGE_CHARACTERS of filler that states the reference first and another value last: a verifier
    that reads the final answer refuses it, one that looks for the reference anywhere pays it."""
    filler = "and so on " * (HUGE_CHARACTERS // 10)
    return f"The answer is {answer}, {filler}so the answer is {other}."


def prompt_text(prompt: str | list[Any] | None) -> str:
    """The user's words of a prompt (its user messages, joined)."""
    if isinstance(prompt, str):
        return prompt
    parts = []
    for message in prompt or []:
        if isinstance(message, dict) and message.get("role") == "user" and isinstance(message.get("content"), str):
            parts.append(message["content"])
    return "\n\n".join(parts)


def _other_value(answer: str) -> str:
    """A value different from the reference, of the same shape where it is a number."""
    stripped = answer.strip()
    try:
        number = float(stripped.replace(",", ""))
    except ValueError:
        return "0" if stripped != "0" else "1"
    if number.is_integer():
        return str(int(number) + 1)
    return repr(number + 1)


def _code_probes(config: Any, text: str) -> list[Probe]:
    body_style = config.style == "humaneval" and bool(config.code_prefix)
    if config.style == "stdio":
        first = config.cases[0].output if config.cases else ""
        return [
            Probe("sys.exit(0) first", "import sys\nsys.exit(0)\n"),
            Probe("os._exit(0) first", "import os\nos._exit(0)\n"),
            Probe("prints the first case's expected output", f"print({first!r}, end='')\n"),
            Probe("a huge output", "print('x' * 20_000_000)\n"),
        ]
    always_equal = (
        "class _AlwaysEqual:\n"
        "    def __eq__(self, other): return True\n"
        "    def __ne__(self, other): return False\n"
        "    def __bool__(self): return True\n"
        "    def __hash__(self): return 0\n"
    )
    if body_style:
        return [
            Probe("returns an object whose __eq__ is always true", _indent(always_equal + "return _AlwaysEqual()\n")),
            Probe("sys.exit(0) before the checks", "    import sys\n    sys.exit(0)\n"),
            Probe("os._exit(0) before the checks", "    import os\n    os._exit(0)\n"),
            Probe("a huge output", "    print('x' * 20_000_000)\n"),
            *_special_case_probe(text, body_style=True, entry_point=config.entry_point),
        ]
    entry = config.entry_point or _first_function_name(config) or "solution"
    return [
        Probe(
            "returns an object whose __eq__ is always true",
            always_equal + f"def {entry}(*args, **kwargs):\n    return _AlwaysEqual()\n",
        ),
        Probe("sys.exit(0) before the checks", "import sys\nsys.exit(0)\n"),
        Probe("os._exit(0) before the checks", "import os\nos._exit(0)\n"),
        Probe("a huge output", "print('x' * 20_000_000)\n"),
        *_special_case_probe(text, body_style=False, entry_point=entry),
    ]


def _special_case_probe(text: str, *, body_style: bool, entry_point: str) -> list[Probe]:
    """Code that answers only the examples shown in the prompt (doctest lines ``>>> f(x)`` + result)."""
    table: dict[str, str] = {}
    for match in _DOCTEST.finditer(text):
        call, result = match.group("call"), match.group("result").strip()
        try:
            parsed = ast.parse(call, mode="eval").body
            ast.literal_eval(result)
        except (SyntaxError, ValueError):
            continue
        if isinstance(parsed, ast.Call) and isinstance(parsed.func, ast.Name) and parsed.func.id == entry_point:
            arguments = "(" + "".join(ast.unparse(argument) + ", " for argument in parsed.args) + ")"
            try:
                table[repr(ast.literal_eval(arguments))] = result
            except ValueError:
                continue
    if not table:
        return []
    lookup = "{" + ", ".join(f"{key!r}: {value}" for key, value in table.items()) + "}"
    if body_style:
        code = f"    return {lookup}.get(repr(tuple(locals().values())))\n"
    else:
        code = f"def {entry_point}(*args):\n    return {lookup}.get(repr(args))\n"
    return [Probe("special-cases the prompt's examples", code)]


def _first_function_name(config: Any) -> str:
    for statement in (config.setup, *config.asserts):
        match = re.search(r"\b([A-Za-z_]\w*)\s*\(", statement)
        if match and match.group(1) not in ("assert", "len", "abs", "set", "sorted", "list", "int", "str"):
            return match.group(1)
    return ""


def _indent(code: str) -> str:
    return "".join("    " + line + "\n" for line in code.splitlines())


def _fixture_probes(fixtures: list[dict[str, str]], *, answer: str | None) -> list[Probe]:
    expectations = {"full_reward": "pass", "zero_reward": "fail", "malformed": "fail", "determinism": "deterministic"}
    probes = []
    for index, fixture in enumerate(fixtures):
        completion = fixture["completion"].replace("{answer}", answer or "")
        label = f"fixture {index + 1} ({fixture['kind']}{': ' + fixture['label'] if fixture['label'] else ''})"
        probes.append(Probe(label, completion, expect=expectations[fixture["kind"]]))
    return probes


def _probe_run(
    kind: VerifierKind, config: Any, probe: Probe, *, answer: str | None, prompt: Any, tools: list[Any] | None = None
) -> Finding | None:
    verdicts: list[Verdict] = []
    for _ in range(3 if probe.expect == "deterministic" else 1):
        verdicts.append(
            _run_check(kind, config, completion=probe.completion, answer=answer, prompt=prompt, tools=tools)
        )
    return _finding(probe, verdicts)


def _finding(probe: Probe, verdicts: list[Verdict]) -> Finding | None:
    verdict = verdicts[0]
    if probe.expect == "no_reward":
        broken = verdict.outcome == "pass" or bool(verdict.reward)
    elif probe.expect == "deterministic":
        broken = len({(each.outcome, each.reward) for each in verdicts}) > 1
    else:
        broken = verdict.outcome != probe.expect
    if not broken:
        return None
    outcome = ", ".join(each.outcome for each in verdicts) if probe.expect == "deterministic" else verdict.outcome
    text = probe.completion if isinstance(probe.completion, str) else repr(probe.completion)
    excerpt = text if len(text) <= EXCERPT_CHARACTERS else text[:EXCERPT_CHARACTERS] + f"… ({len(text):,} characters)"
    return Finding(
        label=probe.label,
        expected={"no_reward": "no reward"}.get(probe.expect, probe.expect),
        outcome=outcome,
        detail=verdict.detail[:300],
        completion=excerpt,
    )
