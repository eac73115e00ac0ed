"""A red team's corpus: completions written to earn reward without solving the task, or to stall
the verifier. Every case must end fail, timeout or error, never pass, and must come back.

Stalls are caught without timing anything: each verification runs under a generous watchdog
(HANG_SECONDS: past it, faulthandler prints every thread's stack and ends the test process, a
failure pytest reports); the inputs are sized so that a quadratic or exponential path would take far
longer than that, and a linear one a small fraction of it.
"""

import faulthandler
import json

import pytest

from engine.sandbox import Sandbox, SandboxMaxima
from engine.verifiers import configure, verify
from engine.verifiers.kinds import code as code_kind

HANG_SECONDS = 60
NOT_A_PASS = ("fail", "timeout", "error")


def verdict_of(verifier, completion, answer=None, prompt=None):
    faulthandler.dump_traceback_later(HANG_SECONDS, exit=True)
    try:
        return verify(verifier=verifier, completion=completion, answer=answer, prompt=prompt)
    finally:
        faulthandler.cancel_dump_traceback_later()


# -- code: the verdict is decided outside the program's interpreter ---------------------------

# Short limits: a stall ends as a timeout whatever the limit, and the stalls (a sleep, a loop, a stopped judge)
# wait them out in both styles here, in the Harbor folders' cases (tests/engine/integrations/test_harbor_code.py)
# and in bench/harbor_corpus.py. The honest solution needs milliseconds of either.
LIMIT_SECONDS = 2
CPU_SECONDS = 1

ADD = {
    "kind": "code",
    "style": "humaneval",
    "code_prefix": 'def add(a, b):\n    """Return a + b."""\n',
    "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(-5, 5) == 0\n",
    "entry_point": "add",
    "timeout_seconds": LIMIT_SECONDS,
    "cpu_seconds": CPU_SECONDS,
    "memory_mb": 256,
}
ASSERTS = {
    "kind": "code",
    "style": "asserts",
    "setup": "import math",
    "asserts": ["assert add(1, 2) == 3", "assert math.isclose(add(0.5, 0.25), 0.75)", "assert add(2, 2)"],
    "timeout_seconds": LIMIT_SECONDS,
    "cpu_seconds": CPU_SECONDS,
    "memory_mb": 256,
}

ALWAYS_EQUAL = """
class Anything(int):
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def __bool__(self): return True
    def __lt__(self, other): return True
    def __hash__(self): return 0
def add(a, b):
    return Anything()
"""
CODE_ATTACKS = {
    "__eq__ always true": ALWAYS_EQUAL,
    "int subclass with __eq__": ALWAYS_EQUAL.replace("class Anything(int)", "class Anything(float)"),
    "str subclass": "class S(str):\n    def __eq__(s, o): return True\ndef add(a, b):\n    return S('x')\n",
    "patched builtins": (
        "import builtins\nbuiltins.AssertionError = type('Quiet', (Exception,), {})\n"
        "builtins.isinstance = lambda *a: True\nbuiltins.abs = lambda x: 0\ndef add(a, b):\n    return 0\n"
    ),
    "abs shadowed at module level": "def abs(x):\n    return 0\ndef add(a, b):\n    return 0\n",
    "patched __main__ and sys.modules": (
        "import sys, types\nfake = types.ModuleType('__main__')\nfake.check = lambda c: None\n"
        "sys.modules['__main__'] = fake\nsys.modules['builtins'].__dict__['check'] = lambda c: None\n"
        "def add(a, b):\n    return 0\n"
    ),
    "gc walk to the test frames": (
        "import gc, sys\n"
        "def add(a, b):\n"
        "    for obj in gc.get_objects():\n"
        "        if isinstance(obj, dict) and 'check' in obj:\n"
        "            obj['check'] = lambda c: None\n"
        "    frame = sys._getframe()\n"
        "    while frame is not None:\n"
        "        frame.f_globals['candidate'] = lambda *a: 3\n"
        "        frame = frame.f_back\n"
        "    return 0\n"
    ),
    "trace function skipping asserts": (
        "import sys\n"
        "def tracer(frame, event, arg):\n"
        "    frame.f_trace_lines = True\n"
        "    return tracer\n"
        "sys.settrace(tracer)\n"
        "def add(a, b):\n    return 0\n"
    ),
    "sys.exit(0) inside the function": "import sys\ndef add(a, b):\n    sys.exit(0)\n",
    "os._exit(0) inside the function": "import os\ndef add(a, b):\n    os._exit(0)\n",
    "os._exit(0) at import": "import os\nos._exit(0)\ndef add(a, b):\n    return a + b\n",
    "raise SystemExit at import": "raise SystemExit(0)\ndef add(a, b):\n    return a + b\n",
    "KeyboardInterrupt from the function": "def add(a, b):\n    raise KeyboardInterrupt\n",
    "kill the whole process group": "import os, signal\ndef add(a, b):\n    os.killpg(0, signal.SIGKILL)\n",
    "kill every process it can": "import os, signal\ndef add(a, b):\n    os.kill(-1, signal.SIGKILL)\n",
    "fake pass report on every descriptor": (
        "import os\n"
        "for fd in range(3, 256):\n"
        "    try:\n"
        '        os.write(fd, b\'{"event": "passed", "nonce": "x"}\\n\' * 4)\n'
        "    except OSError:\n"
        "        pass\n"
        "def add(a, b):\n    return 0\n"
    ),
    # Replies sent ahead of the requests only ever supply values (as a stateful function could);
    # these claim a pass, a wrong value and nonsense.
    "forged protocol replies": (
        "import os, struct, json\n"
        "def add(a, b):\n"
        "    for fd in range(3, 8):\n"
        "        try:\n"
        "            for message in (['passed'], {'event': 'passed'}, ['value', 999, []], ['names', 1]):\n"
        "                payload = json.dumps(message).encode()\n"
        "                os.write(fd, struct.pack('>I', len(payload)) + payload)\n"
        "            os.write(fd, struct.pack('>I', len(payload)) + payload)\n"
        "        except OSError:\n"
        "            pass\n"
        "    return 0\n"
    ),
    "giant frame header": ("import os\ndef add(a, b):\n    os.write(4, b'\\xff\\xff\\xff\\xff')\n    return 0\n"),
    "deeply nested return value": "def add(a, b):\n    x = []\n    for _ in range(100000):\n        x = [x]\n    return x\n",
    "generator instead of a value": "def add(a, b):\n    yield a + b\n",
    "read tests from the judge's memory": (
        "import os, glob\n"
        "def add(a, b):\n"
        "    for path in glob.glob('/proc/*/mem') + glob.glob('/proc/*/fd/*'):\n"
        "        try:\n"
        "            open(path, 'rb').read(1)\n"
        "            return 'leaked'\n"
        "        except Exception:\n"
        "            pass\n"
        "    return 0\n"
    ),
    "infinite loop": "def add(a, b):\n    while True:\n        pass\n",
    "sleep forever": "import time\ndef add(a, b):\n    time.sleep(3600)\n",
    "stop the judge": "import os, signal\ndef add(a, b):\n    os.kill(os.getppid(), signal.SIGSTOP)\n    return 0\n",
    "a gigabyte of output": "import sys\ndef add(a, b):\n    chunk = 'x' * (1 << 20)\n    for _ in range(1024):\n        sys.stdout.write(chunk)\n    return 3\n",
}


@pytest.mark.parametrize("name", sorted(CODE_ATTACKS))
@pytest.mark.parametrize("task", ["humaneval", "asserts"])
def test_code_attack_never_passes(name, task):
    program = CODE_ATTACKS[name]
    verifier = ADD if task == "humaneval" else ASSERTS
    verdict = verdict_of(verifier, program)
    assert verdict.outcome in NOT_A_PASS, verdict
    assert verdict.detail


def test_the_honest_solution_still_passes_both_styles():
    assert verdict_of(ADD, "    return a + b\n").outcome == "pass"
    assert verdict_of(ASSERTS, "def add(a, b):\n    return a + b\n").outcome == "pass"


def test_values_cross_by_value_with_exact_types():
    task = {
        "kind": "code",
        "style": "asserts",
        "asserts": [
            "assert f() == (1, [2.5, None], {'k': {3}}, b'x', 10**40, frozenset({1}), 1+2j)",
            "assert type(f()[0]) is int and type(f()[3]) is bytes",
            "items = [3, 1, 2]\nsort_in_place(items)\nassert items == [1, 2, 3]",
            "counter = Counter()\ncounter.add(2)\nassert counter.total == 2",
            "assert list(squares(3)) == [0, 1, 4]",
        ],
    }
    program = (
        "def f():\n    return (1, [2.5, None], {'k': {3}}, b'x', 10**40, frozenset({1}), 1+2j)\n"
        "def sort_in_place(items):\n    items.sort()\n"
        "class Counter:\n    def __init__(self):\n        self.total = 0\n"
        "    def add(self, n):\n        self.total += n\n"
        "def squares(n):\n    return (i * i for i in range(n))\n"
    )
    assert verdict_of(task, program).outcome == "pass"
    assert verdict_of(task, program.replace("(1, [2.5", "(True, [2.5")).outcome == "fail"


def test_the_programs_exceptions_reach_the_tests_as_builtins():
    task = {
        "kind": "code",
        "style": "asserts",
        "asserts": ["try:\n    f(-1)\nexcept ValueError:\n    pass\nelse:\n    raise AssertionError('no error')"],
    }
    assert verdict_of(task, "def f(x):\n    if x < 0:\n        raise ValueError('negative')\n").outcome == "pass"
    assert verdict_of(task, "def f(x):\n    return x\n").outcome == "fail"


def test_a_test_that_swallows_the_programs_death_still_fails():
    task = {"kind": "code", "style": "asserts", "asserts": ["try:\n    f()\nexcept BaseException:\n    pass"]}
    assert verdict_of(task, "import os\ndef f():\n    os._exit(0)\n").outcome == "fail"


def test_stdio_cannot_pass_by_exiting_early():
    task = {"kind": "code", "style": "stdio", "cases": [{"input": "2\n", "output": "4\n"}], "timeout_seconds": 5}
    assert verdict_of(task, "import os\nos._exit(0)\n").outcome == "fail"
    assert verdict_of(task, "print(int(input()) * 2)\n").outcome == "pass"


def test_asking_for_huge_limits_is_clamped(monkeypatch):
    sandbox = Sandbox(maxima=SandboxMaxima(wall_seconds=2, cpu_seconds=2, memory_bytes=256 << 20))
    monkeypatch.setattr(code_kind, "code_sandbox", lambda config: sandbox)
    task = {**ASSERTS, "timeout_seconds": 600, "cpu_seconds": 600, "memory_mb": 65536, "max_processes": 256}
    try:
        slow = verdict_of(task, "import time\ndef add(a, b):\n    time.sleep(3600)\n")
        hungry = verdict_of(task, "def add(a, b):\n    return len(bytearray(1 << 30))\n")
    finally:
        sandbox.close()
    assert slow.outcome == "timeout"
    assert "limit of 2s" in slow.detail  # the maximum applied, not the task's 600 s
    assert hungry.outcome in ("fail", "timeout")  # 1 GB is over the 256 MB maximum


# -- math --------------------------------------------------------------------------------------

MATH = {"kind": "math", "timeout_seconds": 2}
MATH_ATTACKS = [
    ("\\boxed{41 \\lor 42}", "42", None),
    ("\\boxed{41 \\vee 42}", "42", None),
    ("\\boxed{41 \\wedge 42}", "42", None),
    ("\\boxed{41 \\land 42}", "42", None),
    ("\\boxed{41 \\cup 42}", "42", None),
    ("\\boxed{41 | 42}", "42", None),
    ("\\boxed{41 \\mid 42}", "42", None),
    ("\\boxed{41 \\approx 42}", "42", None),
    ("\\boxed{41 \\implies 42}", "42", None),
    ("\\boxed{41 \\\\ 42}", "42", None),
    ("\\boxed{41 \\text{ or } 42}", "42", None),
    ("\\boxed{41, 42}", "42", None),
    ("2 + 6 = 10", "8", "What is 2 + 6?"),
    ("The answer is \\boxed{2 + 6}.", "8", "What is 2 + 6?"),
    ("\\boxed{10 = 2 + 6}", "8", "What is 2 + 6?"),
    ("\\boxed{(10)^{(10)^{(10)}}}", "5", None),
    ("\\boxed{\\left(10\\right)^{\\left(10\\right)^{\\left(10\\right)}}}", "5", None),
    ("\\boxed{\\left(9\\right)^{9^{9}}!}", "5", None),
    ("$$" + "+".join(["1"] * 25_000) + "$$", "5", None),
    ("\\boxed{" * 8000, "5", None),
]


@pytest.mark.parametrize(("completion", "answer", "prompt"), MATH_ATTACKS)
def test_math_attack_never_passes(completion, answer, prompt):
    verdict = verdict_of(MATH, completion, answer, prompt)
    assert verdict.outcome in NOT_A_PASS, verdict


def test_math_still_passes_honest_answers_around_the_guards():
    assert verdict_of(MATH, "2 + 6 = 8, so \\boxed{8}", "8", "What is 2 + 6?").outcome == "pass"
    assert verdict_of(MATH, "\\boxed{|x|}", "|x|").outcome == "pass"
    assert verdict_of(MATH, "\\boxed{[0, 1) \\cup (2, 3]}", "[0, 1) \\cup (2, 3]").outcome == "pass"


# -- text kinds: parsing stays linear ---------------------------------------------------------

TOOL_ANSWER = json.dumps([{"name": "f", "arguments": {}}])
TEXT_ATTACKS = [
    ({"kind": "numeric"}, "\\boxed{" * 8000, "1"),
    ({"kind": "numeric"}, "\\frac{" + " " * 200_000 + "1", "2"),
    ({"kind": "numeric"}, "9" * 500_000, "1"),
    ({"kind": "numeric", "extract": "whole"}, "1" + " " * 200_000 + "x", "2"),
    ({"kind": "exact", "extract": "answer_tag"}, "<answer>" * 20_000, "1"),
    ({"kind": "exact", "extract": "boxed"}, "\\boxed{" * 20_000, "1"),
    ({"kind": "tool_calls"}, "<tool_call>" * 8000, TOOL_ANSWER),
    ({"kind": "tool_calls"}, "<tool_call>" + " " * 200_000, TOOL_ANSWER),
    ({"kind": "tool_calls"}, '{"name": "f", "arguments": ' + "[" * 100_000 + "]" * 100_000 + "}", TOOL_ANSWER),
    ({"kind": "json"}, "[" * 100_000 + "]" * 100_000, None),
    ({"kind": "json", "schema": {"type": "string", "pattern": "^(a+)+$"}}, json.dumps("a" * 50_000 + "b"), None),
    ({"kind": "regex", "pattern": "(a+)+$"}, "a" * 50_000 + "b", None),
    ({"kind": "regex", "pattern": "(x+x+)+y", "mode": "search"}, "x" * 50_000, None),
    ({"kind": "exact"}, "x" * 2_000_000, "1"),  # over the completion size cap
    ({"kind": "json"}, {"k": "x" * 2_000_000}, None),
]


@pytest.mark.parametrize(("verifier", "completion", "answer"), TEXT_ATTACKS)
def test_text_attack_never_passes_and_comes_back(verifier, completion, answer):
    verdict = verdict_of(verifier, completion, answer)
    assert verdict.outcome in NOT_A_PASS, verdict


def test_completions_over_the_configured_size_fail_with_a_reason():
    try:
        configure(max_completion_chars=100)
        verdict = verdict_of({"kind": "exact"}, "1" + " " * 200, "1")
    finally:
        configure(max_completion_chars=1_000_000)
    assert verdict.outcome == "fail"
    assert "over the limit of 100" in verdict.detail


def test_a_gigabyte_printed_is_read_with_a_cap():
    from engine.sandbox import SandboxLimits, default_sandbox

    program = "import sys\nchunk = 'x' * (1 << 20)\nfor _ in range(1024):\n    sys.stdout.write(chunk)\n"
    run = default_sandbox().run_script(program=program, stdin="", limits=SandboxLimits(max_output_bytes=1 << 20))
    assert run.status in ("output_limit", "timeout")
    assert len(run.stdout) <= 1 << 20
