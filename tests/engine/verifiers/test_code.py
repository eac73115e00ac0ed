"""code: the three test styles, code extraction, and how failures are reported."""

import multiprocessing
import threading

import pytest

from engine.sandbox import Sandbox
from engine.verifiers import verify
from engine.verifiers.kinds import code as code_kind

ADD = {
    "kind": "code",
    "style": "humaneval",
    "code_prefix": 'from typing import List\n\n\ndef add(a: int, b: int) -> int:\n    """Return a + b."""\n',
    "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(-1, 1) == 0\n",
    "entry_point": "add",
}
ASSERTS = {
    "kind": "code",
    "style": "asserts",
    "setup": "import math",
    "asserts": ["assert f(1) == 2", "assert f(2) == 4", "assert math.isclose(f(0.5), 1.0)"],
}
STDIO = {
    "kind": "code",
    "style": "stdio",
    "cases": [{"input": "1 2\n", "output": "3\n"}, {"input": "10 -3\n", "output": "7"}],
}


def run(verifier, completion):
    return verify(verifier=verifier, completion=completion)


# -- humaneval -------------------------------------------------------------------------------


def test_humaneval_body_passes():
    verdict = run(ADD, "    return a + b\n")
    assert (verdict.outcome, verdict.reward) == ("pass", 1.0)


def test_humaneval_whole_function_in_fences_passes():
    completion = (
        "Sure!\n```python\ndef add(a: int, b: int) -> int:\n    return a + b\n```\n"
        "Example:\n```python\nprint(add(1, 2))\n```\n"
    )
    assert run(ADD, completion).outcome == "pass"


def test_humaneval_whole_function_keeps_the_prefix_imports():
    completion = "```python\ndef add(a, b):\n    values: List[int] = [a, b]\n    return sum(values)\n```"
    assert run(ADD, completion).outcome == "pass"


def test_humaneval_unterminated_fence_is_still_read():
    assert run(ADD, "```python\ndef add(a, b):\n    return a + b\n").outcome == "pass"


def test_humaneval_wrong_answer_names_the_failing_assert():
    verdict = run(ADD, "    return a - b\n")
    assert verdict.outcome == "fail"
    assert "assert candidate(1, 2) == 3" in verdict.detail


def test_humaneval_without_prefix():
    config = {k: v for k, v in ADD.items() if k != "code_prefix"}
    assert run(config, "def add(a, b):\n    return a + b\n").outcome == "pass"
    assert run(config, "def plus(a, b):\n    return a + b\n").outcome == "fail"


def test_syntax_error_fails_with_the_line():
    verdict = run(ADD, "    return a +\n")
    assert verdict.outcome == "fail"
    assert "syntax error at line" in verdict.detail


def test_exception_in_the_program_fails():
    verdict = run(ASSERTS, "raise ValueError('boom')\ndef f(x): return 2 * x\n")
    assert verdict.outcome == "fail"
    assert "ValueError: boom" in verdict.detail


def test_empty_program_fails_without_running():
    assert run(ADD, "   \n").outcome == "fail"


# -- asserts ---------------------------------------------------------------------------------


def test_asserts_pass():
    verdict = run(ASSERTS, "def f(x):\n    return 2 * x\n")
    assert verdict.outcome == "pass"
    assert verdict.detail == "all 3 asserts passed"


def test_asserts_name_the_first_failure():
    verdict = run(ASSERTS, "def f(x):\n    return x + 1\n")
    assert verdict.outcome == "fail"
    assert verdict.detail.startswith("assert 2 of 3 failed")
    assert "f(2) == 4" in verdict.detail


def test_printing_does_not_disturb_the_tests():
    assert run(ASSERTS, "print('hello')\ndef f(x):\n    print(x)\n    return 2 * x\n").outcome == "pass"


def test_program_cannot_replace_exec_to_skip_the_tests():
    program = (
        "import builtins\n"
        "builtins.exec = lambda *args, **kwargs: None\n"
        "builtins.compile = lambda *a, **k: None\n"
        "def f(x): return 0\n"
    )
    assert run(ASSERTS, program).outcome == "fail"


def test_program_that_writes_a_fake_pass_report_on_every_descriptor_still_fails():
    program = (
        "import os\n"
        "for fd in range(3, 64):\n"
        "    try:\n"
        '        os.write(fd, b\'{"event": "passed", "nonce": "guess"}\\n\')\n'
        "    except OSError:\n"
        "        pass\n"
        "os._exit(0)\n"
    )
    assert run(ASSERTS, program).outcome == "fail"


def test_program_that_fakes_an_error_report_still_fails():
    program = 'import os\nos.write(3, b\'{"event": "error", "message": "x"}\\n\')\nos._exit(3)\n'
    assert run(ASSERTS, program).outcome == "fail"


# -- stdio -----------------------------------------------------------------------------------


def test_stdio_pass():
    verdict = run(STDIO, "a, b = map(int, input().split())\nprint(a + b)\n")
    assert verdict.outcome == "pass"
    assert verdict.detail == "all 2 cases passed"


def test_stdio_wrong_output_names_the_case():
    verdict = run(STDIO, "a, b = map(int, input().split())\nprint(a + b if a < 5 else 0)\n")
    assert verdict.outcome == "fail"
    assert verdict.detail.startswith("case 2 of 2: expected '7'")


def test_stdio_crash_fails_with_the_exception():
    verdict = run(STDIO, "print(1 / 0)\n")
    assert verdict.outcome == "fail"
    assert "ZeroDivisionError" in verdict.detail


def test_stdio_exit_code_matters():
    verdict = run(STDIO, "import sys\na, b = map(int, input().split())\nprint(a + b)\nsys.exit(3)\n")
    assert verdict.outcome == "fail"
    assert "exited with code 3" in verdict.detail


def test_stdio_sys_exit_zero_after_correct_output_passes():
    assert run(STDIO, "import sys\na, b = map(int, input().split())\nprint(a + b)\nsys.exit(0)\n").outcome == "pass"


@pytest.mark.parametrize(
    ("compare", "wanted", "printed", "expected"),
    [
        ("lines", "3\n", "3  \n\n\n", "pass"),
        ("lines", "1 2 3\n", "1\n2 3", "fail"),
        ("exact", "3\n", "3  \n", "fail"),
        ("exact", "3\n", "3\n", "pass"),
        ("tokens", "1 2 3\n", "1\n2   3", "pass"),
    ],
)
def test_stdio_comparison_modes(compare, wanted, printed, expected):
    config = {"kind": "code", "style": "stdio", "compare": compare, "cases": [{"input": "", "output": wanted}]}
    assert run(config, f"import sys\nsys.stdout.write({printed!r})\n").outcome == expected


# -- plumbing --------------------------------------------------------------------------------


def test_sandbox_failure_is_an_error(monkeypatch):
    broken = Sandbox(python="/nonexistent/python3")
    monkeypatch.setattr(code_kind, "code_sandbox", lambda config: broken)
    verdict = run(ASSERTS, "def f(x): return 2 * x\n")
    assert verdict.outcome == "error"
    assert verdict.reward is None
    assert "sandbox" in verdict.detail


def test_many_threads_share_one_sandbox():
    results = {}

    def work(number):
        results[number] = run(ASSERTS, f"def f(x):\n    return {'2 * x' if number % 2 else 'x'}\n").outcome

    threads = [threading.Thread(target=work, args=(number,)) for number in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert results == {number: ("pass" if number % 2 else "fail") for number in range(16)}


def _verify_in_daemon(queue):
    verdict = verify(verifier=ASSERTS, completion="def f(x):\n    return 2 * x\n")
    math_verdict = verify(verifier={"kind": "math"}, completion="$\\boxed{2}$", answer="2")
    queue.put((verdict.outcome, math_verdict.outcome))


def test_works_inside_a_daemonic_worker_process():
    # Celery prefork children are daemonic: they may not start multiprocessing children.
    run(ASSERTS, "def f(x): return 2 * x\n")  # the parent has a server the child must not reuse
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_verify_in_daemon, args=(queue,), daemon=True)
    child.start()
    result = queue.get(timeout=120)
    child.join(timeout=30)
    assert result == ("pass", "pass")
