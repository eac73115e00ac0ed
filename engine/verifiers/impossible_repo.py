"""The impossible variant of a ``repo_tests`` task: its hidden tests made to contradict the task.

The variant changes only the text of one hidden test file, at one place, so the file is otherwise the task's
byte for byte (line numbers, comments and the test ids stay):

- ``mutated_expectation``: in the tests the verdict counts (FAIL_TO_PASS first, then PASS_TO_PASS, each in the
  order the task lists them), the first expected constant of an ``assert x == constant`` (or ``constant == x``)
  or of an equality call (``self.assertEqual(x, constant)``, ``assert_equal(x, constant)``) moved by the code
  variant's own rule (``impossible.shifted_constant``: a number one unit in its last place, a string's last
  letter moved on). Not a boolean: the grader's canary copy of that test would expect the boolean negated back,
  the honest value, and grade every honest patch ``tampered``;
- ``contradicting_tests``: with no such constant (parametrized tests whose expectations are arguments), the
  first assert of a counted test followed by its negation, two tests that cannot both hold.

A test the verdict does not count, and a test file the task does not hide (it lives in the snapshot), is not
varied. The check (``outcomes``) grades the reference patch and the empty patch on the variant in one sandbox
run, as the import audit grades the task: both must fail, or the variant is broken.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

from engine.repo_tasks import snapshots
from engine.repo_tasks.grading import grade_many
from engine.repo_tasks.patches import extract_patch
from engine.verifiers.base import VerifierConfigError
from engine.verifiers.kinds.repo_tests import parse_config

MUTATED_EXPECTATION, CONTRADICTING_TESTS = "mutated_expectation", "contradicting_tests"
EQUALITY_CALLS = frozenset({"assertEqual", "assertEquals", "assert_equal", "assert_equals"})


def counted_tests(verifier: dict[str, Any]) -> list[tuple[str, str]]:
    """(file, qualname) of every test the verdict counts, FAIL_TO_PASS first, once each: a node id
    ``path.py::Class::test[param]`` is read as (``path.py``, ``Class.test``)."""
    found: list[tuple[str, str]] = []
    for test_id in [*(verifier.get("fail_to_pass") or []), *(verifier.get("pass_to_pass") or [])]:
        path, _, rest = str(test_id).partition("::")
        pair = (path, rest.split("[", 1)[0].replace("::", "."))
        if rest and pair not in found:
            found.append(pair)
    return found


def _test_functions(tree: ast.Module) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """The module's test functions and test-class methods by qualname."""
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions[node.name] = node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    functions[f"{node.name}.{item.name}"] = item
    return functions


def _expected_constant(node: ast.AST) -> ast.Constant | None:
    """The expected constant of an equality assert or an equality call; None for anything else."""
    if isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare):
        test = node.test
        if len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
            for side in (test.comparators[0], test.left):
                if isinstance(side, ast.Constant):
                    return side
    if isinstance(node, ast.Call):
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if name in EQUALITY_CALLS and len(node.args) >= 2:
            for argument in (node.args[1], node.args[0]):
                if isinstance(argument, ast.Constant):
                    return argument
    return None


def _in_order(function: ast.AST) -> list[ast.AST]:
    return sorted(
        (node for node in ast.walk(function) if isinstance(node, (ast.Assert, ast.Call))),
        key=lambda node: (node.lineno, node.col_offset),  # type: ignore[attr-defined]
    )


class _Source:
    """A file's text with ast positions (lines from 1, columns in UTF-8 bytes) turned into text edits."""

    def __init__(self, text: str) -> None:
        self.data = text.encode("utf-8")
        self.starts = [0]
        for line in self.data.splitlines(keepends=True):
            self.starts.append(self.starts[-1] + len(line))

    def offset(self, line: int, column: int) -> int:
        return self.starts[line - 1] + column

    def replaced(self, node: ast.AST, text: str) -> str:
        start = self.offset(node.lineno, node.col_offset)  # type: ignore[attr-defined]
        end = self.offset(node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]
        return (self.data[:start] + text.encode("utf-8") + self.data[end:]).decode("utf-8")

    def line_before(self, node: ast.AST) -> str:
        start = self.starts[node.lineno - 1]  # type: ignore[attr-defined]
        return self.data[start : self.offset(node.lineno, node.col_offset)].decode("utf-8")  # type: ignore[attr-defined]

    def inserted_after(self, node: ast.AST, line: str) -> str:
        at = self.starts[node.end_lineno]  # type: ignore[attr-defined]
        before = self.data[:at] if self.data[:at].endswith(b"\n") else self.data[:at] + b"\n"
        return (before + line.encode("utf-8") + b"\n" + self.data[at:]).decode("utf-8")


def _mutated(text: str, functions: list[str], shift: Callable[[Any], Any]) -> tuple[str, str] | None:
    tree = ast.parse(text)
    defined = _test_functions(tree)
    for qualname in functions:
        for node in _in_order(defined[qualname]) if qualname in defined else []:
            constant = _expected_constant(node)
            if constant is None or isinstance(constant.value, bool):
                continue  # a boolean negated is what the grader's canary copy expects: the honest value
            new = shift(constant.value)
            if new is None or new == constant.value or type(new) is not type(constant.value):
                continue
            changed = _Source(text).replaced(constant, repr(new))
            return changed, f"{qualname} expects {constant.value!r} -> {new!r} (line {constant.lineno})"
    return None


def _negated(text: str, functions: list[str]) -> tuple[str, str] | None:
    tree = ast.parse(text)
    defined = _test_functions(tree)
    source = _Source(text)
    for qualname in functions:
        for node in _in_order(defined[qualname]) if qualname in defined else []:
            indent = source.line_before(node)
            if not isinstance(node, ast.Assert) or indent.strip():
                continue  # an assert alone on its line only: a place to add a statement beside it
            expression = ast.get_source_segment(text, node.test)
            changed = source.inserted_after(node, f"{indent}assert not ({expression})")
            return changed, f"{qualname}: the assert on line {node.lineno} and its negation"
    return None


def repo_variant(verifier: dict[str, Any], *, shift: Callable[[Any], Any]) -> tuple[str, dict[str, Any], str] | str:
    """(variant kind, varied verifier config, a sentence saying what changed), or why none can be derived.
    `shift` moves an expected constant (``impossible.shifted_constant``)."""
    hidden = verifier.get("hidden_tests")
    if not isinstance(hidden, dict) or not hidden:
        return "the task hides no test file to vary (its tests live in the snapshot)"
    by_file: dict[str, list[str]] = {}
    for path, qualname in counted_tests(verifier):
        if isinstance(hidden.get(path), str):
            by_file.setdefault(path, []).append(qualname)
    if not by_file:
        return "no test the verdict counts is in a hidden test file"
    for kind in (MUTATED_EXPECTATION, CONTRADICTING_TESTS):
        for path, functions in by_file.items():
            text = hidden[path]
            varied = _mutated(text, functions, shift) if kind == MUTATED_EXPECTATION else _negated(text, functions)
            if varied is not None:
                config = {**verifier, "hidden_tests": {**hidden, path: varied[0]}}
                return kind, config, f"{path}: {varied[1]}"
    return "no counted test in the hidden test files has an assert to change"


def outcomes(*, verifier: dict[str, Any], answer: str | None) -> tuple[str, str]:
    """The outcomes of the reference patch (`answer`) and of the empty patch on the variant `verifier`, graded
    in one sandbox run; an outcome other than pass, fail or tampered carries its detail (``error: ...``)."""
    try:
        config = parse_config(dict(verifier))
        data = snapshots.load(config.snapshot)
    except (VerifierConfigError, snapshots.SnapshotError) as error:
        return (f"error: {error}",) * 2
    results = grade_many(task=config, snapshot=data, patches=[extract_patch(answer or ""), ""])
    shown = [
        result.outcome if result.outcome in ("pass", "fail", "tampered") else f"{result.outcome}: {result.detail}"
        for result in results
    ]
    return shown[0], shown[1]
