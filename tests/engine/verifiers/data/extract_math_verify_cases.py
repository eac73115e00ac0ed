"""Rebuild math_verify_cases.json from math-verify's source distribution (its tests/ folder).

    pip download --no-deps --no-binary :all: math-verify==0.9.0 -d /tmp/mv && tar xzf ...
    python tests/engine/verifiers/data/extract_math_verify_cases.py <unpacked sdist> <output .json>

Collects math-verify's own tests with pytest (nothing is run) and keeps, for every
parametrized case that compares a gold answer with a prediction, the strings, the expected
verdict and the settings its test passes (extraction targets, float precision, strict,
allow_set_relation_comp). Tests of the parser alone (string extraction, timeouts, configs)
are listed under "not_comparisons". Only data is kept; none of math-verify's test code.
"""

from __future__ import annotations

import ast
import inspect
import json
import sys
import textwrap
from pathlib import Path

import pytest

SETTINGS = ("match_types", "precision", "strict", "allow_set_relation_comp")
DEFAULTS = {"match_types": None, "precision": 6, "strict": True, "allow_set_relation_comp": False}


def _call_settings(function) -> dict | None:
    """The keyword settings of the compare_strings / verify call in a test, or None if it has none."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") in ("compare_strings", "verify"):
            settings = {"call": node.func.id}
            for keyword in node.keywords:
                if keyword.arg in SETTINGS:
                    value = keyword.value
                    settings[keyword.arg] = (
                        ("param", value.id) if isinstance(value, ast.Name) else ast.literal_eval(value)
                    )
            return settings
    return None


def _literal_calls(function) -> list[dict]:
    """``compare_strings("gold", "pred", ...) == N`` written out in a test that is not parametrized."""
    found = []
    for node in ast.walk(ast.parse(textwrap.dedent(inspect.getsource(function)))):
        if not (isinstance(node, ast.Compare) and isinstance(node.left, ast.Call)):
            continue
        call = node.left
        if getattr(call.func, "id", "") != "compare_strings" or len(call.args) < 2:
            continue
        gold, pred = (ast.literal_eval(argument) for argument in call.args[:2])
        case = {"gold": gold, "pred": pred, "expected": bool(ast.literal_eval(node.comparators[0]))}
        keywords = {keyword.arg: ast.literal_eval(keyword.value) for keyword in call.keywords}
        found.append({**case, **{name: keywords.get(name, DEFAULTS[name]) for name in SETTINGS}})
    return found


class Collector:
    def __init__(self) -> None:
        self.cases: list[dict] = []
        self.not_comparisons: list[str] = []

    def pytest_collection_modifyitems(self, items) -> None:
        for item in items:
            params = getattr(getattr(item, "callspec", None), "params", {})
            settings = _call_settings(item.function)
            gold, pred = params.get("gold"), params.get("pred")
            expected = params.get("expected", params.get("result"))
            if settings is None or not isinstance(gold, str) or not isinstance(pred, str) or expected is None:
                literal = [] if params else _literal_calls(item.function)
                self.cases += [{"id": f"{item.nodeid}[{number}]", **case} for number, case in enumerate(literal)]
                self.not_comparisons.append(item.nodeid)
                continue
            case = {"id": item.nodeid, "gold": gold, "pred": pred, "expected": bool(expected)}
            for name in SETTINGS:
                value = settings.get(name, DEFAULTS[name])
                case[name] = params[value[1]] if isinstance(value, tuple) else value
            if settings["call"] == "verify":
                case["match_types"] = "default"  # parse() with its default targets
            self.cases.append(case)


def main() -> None:
    root = Path(sys.argv[1]).resolve()
    collector = Collector()
    sys.path.insert(0, str(root))
    pytest.main(
        ["--collect-only", "-q", "-p", "no:cacheprovider", "-c", str(root / "pyproject.toml"), str(root / "tests")],
        plugins=[collector],
    )
    version = next(
        line.split(":", 1)[1].strip()
        for line in (root / "PKG-INFO").read_text().splitlines()
        if line.startswith("Version:")
    )
    Path(sys.argv[2]).write_text(
        json.dumps(
            {
                "source": f"math-verify {version}, source distribution from PyPI, folder tests/",
                "licence": "math-verify is Apache-2.0 (its LICENCE file); its tests/test_all.py carries an MIT notice, "
                "Copyright (c) 2024 The HuggingFace Team. These are its test inputs and expected verdicts, as data.",
                "cases": collector.cases,
                "not_comparisons": collector.not_comparisons,
            },
            indent=1,
            ensure_ascii=False,
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
