"""``code``: a Python program written by the model, run against the task's tests in the sandbox.

The program never runs in the calling process: see ``engine/sandbox/__init__.py``. A
completion may be plain code or prose with ```python fences; the code is extracted (the last
fenced block that defines the entry point, else the last block).

Config, one of three styles::

    # HumanEval: code_prefix + completion, then `test` (which defines check), then check(entry_point)
    {"kind": "code", "style": "humaneval",
     "code_prefix": "def add(a, b):\\n    \\"\\"\\"Add.\\"\\"\\"\\n",   # HumanEval's "prompt"; optional
     "test": "def check(candidate):\\n    assert candidate(1, 2) == 3\\n",
     "entry_point": "add"}
    # The completion may be the function body (appended to code_prefix) or a whole program that
    # defines entry_point (appended after code_prefix, so helpers and imports there still exist).

    # A list of assert statements run after the program, one by one (the first failure is named)
    {"kind": "code", "style": "asserts",
     "setup": "import math",                       # optional, runs before the asserts
     "asserts": ["assert add(1, 2) == 3", "assert add(-1, 1) == 0"]}

    # Standard input / output cases: the program runs once per case as __main__
    {"kind": "code", "style": "stdio",
     "cases": [{"input": "1 2\\n", "output": "3\\n"}],
     "compare": "lines"}     # "lines" (default: trailing spaces and blank lines ignored) |
                             # "tokens" (whitespace-separated tokens) | "exact"

Limits (all styles, all optional)::

     "timeout_seconds": 10,      # wall clock per run (a stdio case is one run)
     "cpu_seconds": 10,          # CPU per process (default: timeout_seconds)
     "memory_mb": 1024,          # address space per process
     "max_processes": 4,         # processes and threads, the program included
     "max_output_bytes": 1000000 # stdout/stderr cap; more ends the run as a fail

What the program can import (all styles, optional)::

     "packages": ["numpy"]       # installed distributions (pip names) the program may import, with
                                 # what they require; default none: the standard library only

The program sees the standard library and the declared packages only (``engine/sandbox/view.py``):
never Passband's virtualenv, its settings or its source.

Outcomes: pass when every test passed; fail for wrong answers, exceptions, syntax errors, early
exits, crashes, output over the cap; timeout when a time limit was hit; error when the sandbox
itself failed. The reference answer is the canonical solution: a function body for humaneval
with a code_prefix, a whole program otherwise.
"""

from __future__ import annotations

import ast
import signal
from dataclasses import dataclass
from typing import Any

from engine.sandbox import Sandbox, SandboxLimits, SandboxRun
from engine.sandbox.view import MissingDistribution, SandboxView, sandbox_for
from engine.verifiers.base import (
    Check,
    ConfigReader,
    VerifierConfigError,
    errored,
    failed,
    passed,
    shorten,
    timed_out,
)
from engine.verifiers.kind import KindExample, KindExports, VerifierKind
from engine.verifiers.text import completion_text, defines_function, extract_python_code

KIND = "code"
STYLES = ("humaneval", "asserts", "stdio")
COMPARE_MODES = ("lines", "tokens", "exact")


@dataclass(frozen=True)
class StdioCase:
    input: str
    output: str


@dataclass(frozen=True)
class CodeConfig:
    style: str
    code_prefix: str
    test: str
    entry_point: str
    setup: str
    asserts: tuple[str, ...]
    cases: tuple[StdioCase, ...]
    compare: str
    limits: SandboxLimits
    packages: tuple[str, ...] = ()


def _require_compiles(field: str, source: str) -> None:
    try:
        compile(source, field, "exec")
    except SyntaxError as error:
        raise VerifierConfigError(field, f"is not valid Python (line {error.lineno}: {error.msg})") from None


def parse_config(raw: dict[str, Any]) -> CodeConfig:
    reader = ConfigReader(raw, kind=KIND)
    reader.string("language", "python", choices=("python",))
    style = reader.string("style", choices=STYLES)
    code_prefix = test = entry_point = setup = ""
    asserts: list[str] = []
    cases: list[StdioCase] = []
    compare = "lines"
    if style == "humaneval":
        code_prefix = reader.string("code_prefix", "")
        test = reader.string("test", non_empty=True)
        entry_point = reader.string("entry_point", non_empty=True)
        if not entry_point.isidentifier():
            raise VerifierConfigError("entry_point", f"must be a Python function name, got {entry_point!r}")
        _require_compiles("test", test)
        if code_prefix:
            _require_compiles("code_prefix", code_prefix)
    elif style == "asserts":
        setup = reader.string("setup", "")
        asserts = reader.string_list("asserts", non_empty=True)
        if setup:
            _require_compiles("setup", setup)
        for index, statement in enumerate(asserts):
            _require_compiles(f"asserts[{index}]", statement)
    else:
        for index, case in enumerate(reader.list_of_mappings("cases", non_empty=True)):
            if set(case) != {"input", "output"} or not all(isinstance(case[key], str) for key in case):
                raise VerifierConfigError(f"cases[{index}]", 'must be {"input": string, "output": string}')
            cases.append(StdioCase(input=case["input"], output=case["output"]))
        compare = reader.string("compare", "lines", choices=COMPARE_MODES)
    timeout_seconds = reader.number("timeout_seconds", 10.0, minimum=0, maximum=600, exclusive_minimum=True)
    limits = SandboxLimits(
        wall_seconds=timeout_seconds,
        cpu_seconds=reader.number("cpu_seconds", timeout_seconds, minimum=0, maximum=600, exclusive_minimum=True),
        memory_bytes=reader.integer("memory_mb", 1024, minimum=64, maximum=65536) << 20,
        max_processes=reader.integer("max_processes", 4, minimum=1, maximum=256),
        max_output_bytes=reader.integer("max_output_bytes", 1_000_000, minimum=1024, maximum=1 << 30),
    )
    packages = tuple(reader.string_list("packages", []))
    try:
        SandboxView.of(distributions=packages).entries()
    except MissingDistribution as error:
        raise VerifierConfigError("packages", str(error)) from None
    reader.finish()
    return CodeConfig(
        style=style,
        code_prefix=code_prefix,
        test=test,
        entry_point=entry_point,
        setup=setup,
        asserts=tuple(asserts),
        cases=tuple(cases),
        compare=compare,
        limits=limits,
        packages=packages,
    )


def code_sandbox(config: CodeConfig) -> Sandbox:
    """The sandbox whose view is the standard library and ``config.packages`` (one fork server per view
    in this process)."""
    return sandbox_for(SandboxView.of(distributions=config.packages))


def humaneval_program(config: CodeConfig, code: str) -> str:
    """code_prefix plus the completion: appended as a body, or after it when it is a whole program."""
    if config.code_prefix and defines_function(code, config.entry_point):
        return config.code_prefix.rstrip("\n") + "\n\n\n" + code
    return config.code_prefix + code


def check(config: CodeConfig, *, completion: Any, answer: str | None = None, prompt: Any = None) -> Check:
    code = extract_python_code(completion_text(completion), entry_point=config.entry_point or None)
    if not code.strip():
        return failed("empty program")
    if config.style == "stdio":
        return _check_stdio(config, code)
    sandbox = code_sandbox(config)
    if config.style == "humaneval":
        run = sandbox.run_tests(
            program=humaneval_program(config, code),
            tests=[f"{config.test}\n\ncheck({config.entry_point})\n"],
            prelude=config.code_prefix,
            entry_point=config.entry_point,
            limits=config.limits,
        )
        return _judge_test_run(run, config=config, labels=["check"])
    tests = ([config.setup] if config.setup else []) + list(config.asserts)
    labels = (["setup"] if config.setup else []) + [
        f"assert {i + 1} of {len(config.asserts)}" for i in range(len(config.asserts))
    ]
    run = sandbox.run_tests(program=code, tests=tests, limits=config.limits)
    return _judge_test_run(run, config=config, labels=labels)


def _judge_common(run: SandboxRun, config: CodeConfig, where: str = "") -> Check | None:
    """Verdicts that do not depend on the style (sandbox error, limits, crashes)."""
    prefix = f"{where}: " if where else ""
    limits = run.limits or config.limits  # after the sandbox's maxima clamped what the task asked
    if run.status == "error":
        return errored(f"{prefix}sandbox error: {run.error}")
    if run.status == "timeout":
        if run.timeout_reason == "cpu":
            return timed_out(f"{prefix}CPU time limit of {limits.cpu_seconds:g}s exceeded")
        return timed_out(f"{prefix}wall-clock limit of {limits.wall_seconds:g}s exceeded")
    if run.status == "output_limit":
        return failed(f"{prefix}output limit exceeded ({run.error})")
    if run.status == "signaled":
        return failed(f"{prefix}program killed by {_signal_name(run.signal)}")
    syntax = run.event("syntax_error")
    if syntax is not None:
        return failed(f"{prefix}syntax error at line {syntax.get('line')}: {shorten(str(syntax.get('error')), 120)}")
    return None


def _judge_test_run(run: SandboxRun, *, config: CodeConfig, labels: list[str]) -> Check:
    common = _judge_common(run, config)
    if common is not None:
        return common
    if run.passed:
        count = len(config.asserts) if config.style == "asserts" else 1
        return passed("all tests passed" if config.style == "humaneval" else f"all {count} asserts passed")
    failure = run.event("test_failed")
    if failure is not None:
        index = int(failure.get("index", 0))
        label = labels[index] if 0 <= index < len(labels) else f"test {index}"
        source = failure.get("source") or ""
        where = f" at line {failure.get('line')}: {shorten(source, 100)}" if source else ""
        return failed(f"{label} failed{where} ({shorten(str(failure.get('error')), 120)})")
    error = run.event("program_error")
    if error is not None:
        text = str(error.get("error"))
        if text.startswith("SystemExit"):
            return failed(f"program called sys.exit ({shorten(text, 60)}) before the tests finished")
        line = f" at line {error.get('line')}" if error.get("line") else ""
        return failed(f"program raised {shorten(text, 120)}{line}")
    if run.program_signal is not None:
        return failed(f"program killed by {_signal_name(run.program_signal)} before the tests finished")
    if run.program_exit_code is not None:
        return failed(f"program exited (code {run.program_exit_code}) before the tests finished")
    return failed(f"tests did not finish (exit code {run.exit_code})")


def _check_stdio(config: CodeConfig, code: str) -> Check:
    sandbox = code_sandbox(config)
    total = len(config.cases)
    for number, case in enumerate(config.cases, start=1):
        where = f"case {number} of {total}"
        run = sandbox.run_script(program=code, stdin=case.input, limits=config.limits)
        common = _judge_common(run, config, where)
        if common is not None:
            return common
        if run.exit_code != 0:
            error = run.event("program_error")
            reason = shorten(str(error.get("error")), 120) if error else _last_line(run.stderr)
            return failed(f"{where}: exited with code {run.exit_code}" + (f" ({reason})" if reason else ""))
        if not outputs_match(run.stdout, case.output, mode=config.compare):
            return failed(f"{where}: expected {shorten(case.output, 60)!r}, got {shorten(run.stdout, 60)!r}")
    return passed(f"all {total} cases passed")


def outputs_match(got: str, expected: str, *, mode: str) -> bool:
    if mode == "exact":
        return got == expected
    if mode == "tokens":
        return got.split() == expected.split()
    return _normalized_lines(got) == _normalized_lines(expected)


def _normalized_lines(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return shorten(lines[-1], 120) if lines else ""


def _signal_name(number: int | None) -> str:
    try:
        return signal.Signals(int(number or 0)).name
    except ValueError:
        return f"signal {number}"


# -- audit ------------------------------------------------------------------------------------


def audit_failing_completions(config: CodeConfig, answer: str | None) -> list[tuple[str, str]]:
    """Stub solutions that a sound test suite must reject: bodies of ``pass`` and ``return None``.

    For humaneval with a code_prefix they are indented bodies; otherwise the reference program
    with every function body replaced (or an empty program when it defines no function).
    """
    if config.style == "humaneval" and config.code_prefix:
        return [("stub body `pass`", "    pass\n"), ("stub body `return None`", "    return None\n")]
    stubs = []
    for label, body in (("pass", "pass"), ("return None", "return None")):
        program = _stub_program(answer or "", body)
        if program is not None:
            stubs.append((f"stub `{label}` bodies", program))
    return stubs


def _stub_program(source: str, body: str) -> str | None:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    functions = [node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if not functions:
        return body
    replacement = ast.parse(body).body
    for function in functions:
        function.body = list(replacement)
    return ast.unparse(tree) + "\n"


def _harbor_folder(task: Any) -> dict[str, bytes]:
    from engine.integrations.harbor_code import code_harbor_folder

    return code_harbor_folder(
        key=task.key, prompt=task.prompt, answer=task.answer, raw_config=task.raw_config, config=task.config
    )


VERIFIER_KIND = VerifierKind(
    name=KIND,
    parse_config=parse_config,
    check=check,
    audit_failing_completions=audit_failing_completions,
    gameability="code",
    exports=KindExports(harbor=_harbor_folder),
    examples=(
        KindExample(
            {"kind": KIND, "style": "asserts", "asserts": ["assert add(2, 3) == 5", "assert add(-1, 1) == 0"]},
            passing="def add(a, b):\n    return a + b\n",
            failing="def add(a, b):\n    return a - b\n",
            answer="def add(a, b):\n    return a + b\n",
        ),
    ),
)
