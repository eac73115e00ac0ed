"""A tiny repository with one bug, its reference fix, and a hidden test (shared by the repo task tests)."""

from engine.repo_tasks import snapshots
from engine.repo_tasks.grading import RepoTaskSpec
from engine.repo_tasks.patches import diff_files

FIXED_OPS = '''def add(a, b):
    return a + b


def clamp(value, low, high):
    """value, but no less than low and no more than high."""
    return max(low, min(value, high))
'''
BUGGY_OPS = FIXED_OPS.replace("max(low, min(value, high))", "max(low, value)")
VISIBLE_TESTS = """from calc.ops import add, clamp


def test_add():
    assert add(1, 2) == 3


def test_clamp_low():
    assert clamp(-5, 0, 3) == 0
"""
HIDDEN_TESTS = (
    VISIBLE_TESTS
    + """

def test_clamp_high():
    assert clamp(5, 0, 3) == 3
"""
)
FILES = {
    "calc/__init__.py": "from calc.ops import add, clamp\n",
    "calc/ops.py": BUGGY_OPS,
    "tests/test_ops.py": VISIBLE_TESTS,
    "tests/test_more.py": "from calc import add\n\n\ndef test_add_negative():\n    assert add(-1, -1) == -2\n",
    "pyproject.toml": '[project]\nname = "calc"\nversion = "1.0"\n\n[tool.pytest.ini_options]\ntestpaths = ["tests"]\n',
    "README.md": "calc: tiny arithmetic helpers.\n",
}
SNAPSHOT = snapshots.build_from_files({path: text.encode() for path, text in FILES.items()})
REFERENCE_PATCH = diff_files(FILES, {**FILES, "calc/ops.py": FIXED_OPS})
HANGING_PATCH = diff_files(
    FILES, {**FILES, "calc/ops.py": BUGGY_OPS.replace("return max(low, value)", "while True:\n        pass")}
)
SPEC = RepoTaskSpec(
    snapshot=snapshots.digest_of(SNAPSHOT),
    fail_to_pass=("tests/test_ops.py::test_clamp_high",),
    pass_to_pass=(
        "tests/test_ops.py::test_add",
        "tests/test_ops.py::test_clamp_low",
        "tests/test_more.py::test_add_negative",
    ),
    hidden_tests={"tests/test_ops.py": HIDDEN_TESTS},
    timeout_seconds=20,
)


def tiny_row(snapshot: str, *, key="calc-clamp", fail_to_pass=("tests/test_ops.py::test_clamp_high",), answer=None):
    """A task on the tiny repository whose verifier names `snapshot` (a digest, or an uploaded file's name)."""
    return {
        "key": key,
        "prompt": "clamp() ignores its upper bound. Answer with a unified diff.",
        "answer": answer if answer is not None else f"```diff\n{REFERENCE_PATCH}```",
        "verifier": {
            "kind": "repo_tests",
            "snapshot": snapshot,
            "fail_to_pass": list(fail_to_pass),
            "pass_to_pass": ["tests/test_ops.py::test_add", "tests/test_more.py::test_add_negative"],
            "hidden_tests": {"tests/test_ops.py": HIDDEN_TESTS},
            "timeout_seconds": 30,
        },
    }
