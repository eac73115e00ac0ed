"""Build curation/demo_data/repo_tasks.json: bug-fix tasks injected into inflection 0.5.1.

SWE-smith's recipe, procedurally: for each public function of the library, try small edits
(operators below) one occurrence at a time; run the library's own tests on the mutated copy in the
sandbox; keep the edits that break at least one test without breaking collection; write the issue
from the failing behaviour (the test that fails and its assertion). At most MAX_PER_FUNCTION per
function, MAX_TASKS in all, so the set spreads over the library.

    .venv/bin/python scripts/build_repo_demo.py     # a minute or two; writes the file
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from curation.repo_demo import SOURCE_FILE, TASKS_FILE, TEST_FILE, pristine_files, snapshot_bytes, with_bug  # noqa: E402
from engine.repo_tasks.grading import GradeResult, RepoTaskSpec, grade  # noqa: E402
from engine.repo_tasks.snapshots import digest_of  # noqa: E402

OPERATORS = [
    ("flip equality", "==", "!="),
    ("flip inequality", "!=", "=="),
    ("off by one", " < ", " <= "),
    ("off by one", " > ", " >= "),
    ("negate membership", " in (", " not in ("),
    ("swap case", ".upper()", ".lower()"),
    ("swap case", ".lower()", ".upper()"),
    ("shift a slice", "[1:]", "[2:]"),
    ("wrong index", "[0]", "[-1]"),
    ("wrong separator", "'_'", "' '"),
    ("wrong separator", "'-'", "'_'"),
    ("wrong modulus", "% 100", "% 1000"),
    ("wrong constant", "(11, 12, 13)", "(11, 12)"),
    ("wrong group", "group(1)", "group(0)"),
    ("flip a flag", "True", "False"),
    ("drop a negation", "not ", ""),
    ("wrong strip", ".strip(", ".rstrip("),
    ("drop a reversal", "reversed(", "list("),
    ("wrong suffix", '"th"', '"st"'),
    ("wrong quantifier", "{2,}", "{3,}"),
    ("drop an anchor", "|{sep}$", "|{sep}"),
    ("wrong character class", "a-z0-9", "a-z"),
    ("wrong normal form", "'NFKD'", "'NFC'"),
    ("swap the order", "{}{}", "{1}{0}"),
    ("wrong capitalisation", ".capitalize()", ".lower()"),
    ("drop a title case", ".title()", ""),
    ("wrong backreference", "r'\\1_\\2'", "r'\\1\\2'"),
    ("wrong replacement", '"-", "_"', '"-", " "'),
    ("search instead of match", "re.search(rule, word)", "re.match(rule, word)"),
    ("word boundary dropped", "\\b(%s)", "(%s)"),
    ("wrong branch", "if not word or", "if word or"),
    ("wrong composition", "pluralize(underscore(word))", "underscore(pluralize(word))"),
    ("wrong composition", "humanize(underscore(word))", "humanize(word)"),
]
MAX_PER_FUNCTION = 4
MAX_TASKS = 40


def functions(source: str) -> list[str]:
    return [name for name in re.findall(r"^def (\w+)\(", source, re.MULTILINE) if not name.startswith("_")]


def candidates(source: str, function: str):
    start = source.index(f"\ndef {function}(")
    end = source.find("\ndef ", start + 1)
    body = source[start : len(source) if end < 0 else end]
    docstring_end = body.find('"""', body.find('"""') + 3) + 3 if '"""' in body else 0
    for label, find, replace in OPERATORS:
        position, occurrence = -1, -1
        while True:
            position = body.find(find, position + 1)
            if position < 0:
                break
            occurrence += 1
            if position > docstring_end:
                yield {
                    "function": function,
                    "operator": label,
                    "find": find,
                    "replace": replace,
                    "occurrence": occurrence,
                }


def first_assertion(text: str) -> str:
    lines = [line for line in text.splitlines() if line.startswith("E ")]
    return "\n".join(lines[:3]) if lines else text.strip().splitlines()[-1] if text.strip() else ""


def issue_text(function: str, result: GradeResult, failing: list[str]) -> str:
    example = failing[0]
    assertion = first_assertion(result.tests[example].text)
    more = f"{len(failing)} tests fail" if len(failing) > 1 else "It is the only test that fails"
    listed = "\n".join(f"- `{test}`" for test in failing[:5]) + ("\n- ..." if len(failing) > 5 else "")
    return (
        f"`inflection.{function}()` returns wrong results\n\n"
        f"`{function}` no longer behaves as documented. Running the test suite, `{example}` fails:\n\n"
        f"```\n{assertion}\n```\n\n{more}:\n\n{listed}\n"
    )


def main() -> None:
    pristine = pristine_files()
    every_test = RepoTaskSpec(snapshot="", fail_to_pass=(), extra_test_files=(TEST_FILE,))
    baseline = grade(task=every_test, snapshot=snapshot_bytes(pristine), patch="")
    passing = sorted(test for test in baseline.tests if baseline.passed(test))
    print(f"{len(passing)} tests pass on the pristine library")
    tasks = []
    seen = set()  # two edits can give the same file: one task each
    for function in functions(pristine[SOURCE_FILE]):
        kept, operators = 0, set()
        for bug in candidates(pristine[SOURCE_FILE], function):
            if kept >= MAX_PER_FUNCTION or len(tasks) >= MAX_TASKS:
                break
            if bug["operator"] in operators:
                continue
            buggy = with_bug(pristine, bug)
            data = snapshot_bytes(buggy)
            if digest_of(data) in seen:
                continue
            seen.add(digest_of(data))
            spec = RepoTaskSpec(snapshot=digest_of(data), fail_to_pass=(), extra_test_files=(TEST_FILE,))
            result = grade(task=spec, snapshot=data, patch="")
            failing = [test for test in passing if not result.passed(test)]
            if result.outcome not in ("pass", "fail") or result.collect_errors or not failing:
                continue
            kept += 1
            operators.add(bug["operator"])
            key = f"inflection-{function}-{len([t for t in tasks if t['function'] == function]) + 1}"
            tasks.append({**bug, "key": key, "fail_to_pass": failing, "issue": issue_text(function, result, failing)})
            print(f"{key}: {bug['operator']} breaks {len(failing)} tests")
    TASKS_FILE.write_text(json.dumps({"passing_tests": passing, "tasks": tasks}, indent=1) + "\n", encoding="utf-8")
    print(f"{len(tasks)} tasks written to {TASKS_FILE.name}")


if __name__ == "__main__":
    main()
