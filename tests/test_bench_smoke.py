"""The benchmarks that took over the suite's sweeps and cost claims still run: each moved script at a tiny
size, through its own command line, ends cleanly and prints its result (docs/benchmarks.md, "The suite":
what moved where). The full sizes and their figures are in docs/benchmarks*.md."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# script, tiny arguments, a line its output must hold
MOVED = {
    "harbor_humaneval": ("bench/harbor_humaneval.py", ["--problems", "1", "--threads", "1"], "oracle earned 1: 1 of 1"),
    "harbor_corpus": (
        "bench/harbor_corpus.py",
        ["--attacks", "1"],
        "the folder paid what Passband's verifier passes: 8 of 8",
    ),
    "reasoning_gym_sweep": ("bench/verifiers/reasoning_gym_sweep.py", ["--generators", "2"], "2 of 2 generators keep"),
    "savings": (
        "bench/calibration/savings.py",
        ["--pilot", "300", "--seeds", "1", "--score-tasks", "300"],
        "| per stratum of score |",
    ),
    "learned": ("bench/calibration/learned.py", ["--pilot", "200", "--seeds", "1"], "| uniform |"),
    "weak_tests": ("bench/weak_tests.py", ["--problems", "2", "--no-import"], "| HumanEval's own | 2 |"),
    "impossible_variants": (
        "bench/impossible_variants.py",
        ["--tasks", "4", "--sample", "2", "--rollouts", "2", "--cap", "8"],
        "false passes on the variants: 0 of 4",
    ),
    # Not moved from the suite, but a sweep all the same: the estimators against servers of known rates.
    "estimates": (
        "bench/estimates.py",
        ["--runs", "1", "--tasks", "4", "--policy", "adaptive", "--rollouts", "8", "--round-size", "4"]
        + ["--concurrency", "2"],
        "fitted: first figure once a tenth is stored",
    ),
    # A page view's time left from the stopping rule, computed and kept.
    "pace_cache": (
        "bench/pace_cache.py",
        ["--cap", "16", "--round-size", "4", "--states", "4", "--views", "2"],
        "kept in the cache (now): median",
    ),
}


@pytest.mark.parametrize("name", MOVED)
def test_a_moved_benchmark_runs_at_a_tiny_size(name):
    script, arguments, expected = MOVED[name]
    result = subprocess.run([sys.executable, script, *arguments], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert expected in result.stdout, result.stdout[-3000:]
