"""The test process: pytest, with Passband's recording plug-in and guard, on the patched repository.

Runs inside the sandbox, started by ``runner_program.py`` as a server (``python -I -B pytest_child.py
serve CONTROL_FD PATH_JSON``) that imports pytest once, with the sandbox's own paths only, and forks
one test process per patch on request (``serve``); or directly for one run (``python -I -B
pytest_child.py REPORT_FD NONCE_FD REPO ARGS_JSON PATH_JSON PLAN_PATH``). Standard library and pytest only. The
model's code runs in this process (it is what the tests import), so everything the grader relies on
is set up before the repository joins ``sys.path``:

* the hidden test files are compiled here from the text the runner holds (``hidden_tests.py``:
  renamed per grade, strict comparisons, canaries; then pytest's assertion rewrite), and pytest's
  collector loads each test module from that code object (``test_guard.Guard.load``), never from
  disk or ``sys.modules``;
* each test is called through a wrapper that checks, before and after, that its code and globals are
  the grader's, the module's globals and builtins unchanged, its parametrized arguments pytest's;
* a test counts only with a ``call`` report that passed AND a completion mark written by that
  wrapper after it returned; the session must end (a ``finish`` record); the records carry a nonce
  read from a pipe before any repository code is imported.
"""

import json
import os
import socket
import sys
import types

PR_SET_DUMPABLE = 4


def _load_source(name, source):
    module = types.ModuleType(name)
    sys.modules[name] = module
    exec(compile(source, name + ".py", "exec"), module.__dict__)
    return module


def main() -> None:
    # The sandbox's own interpreter paths (the standard library and the installed packages);
    # the script's folder and the current directory are not among them.
    if sys.argv[1] == "serve":
        sys.path[:] = json.loads(sys.argv[3])
        serve(int(sys.argv[2]))
        return
    sys.path[:] = json.loads(sys.argv[5])
    code = run_session(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], json.loads(sys.argv[4]), sys.argv[6])
    sys.exit(code)


def _dumpable(flag):
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, flag, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def serve(control_fd: int) -> None:
    """Import pytest once, then per request (a JSON line with the report, nonce and output fds
    attached) fork a test process in its own session; answer ``{"pid"}`` then ``{"exit"}``."""
    import importlib  # noqa: F401 - imported before any fork, like pytest's modules
    import inspect  # noqa: F401

    import _pytest.assertion.rewrite  # noqa: F401
    import _pytest.pathlib  # noqa: F401
    import _pytest.python  # noqa: F401
    import _pytest.runner  # noqa: F401
    import pytest  # noqa: F401

    _dumpable(0)  # a test process cannot reach this server's memory
    control = socket.socket(fileno=control_fd)
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(control, 1 << 16, 3)
        except OSError:
            return
        if not message:
            return
        request = json.loads(message)
        pid = os.fork()
        if pid == 0:
            control.close()
            _forked(request, *fds)
        for fd in fds:
            os.close(fd)
        control.sendall((json.dumps({"pid": pid}) + "\n").encode())
        _, status = os.waitpid(pid, 0)
        control.sendall((json.dumps({"exit": os.waitstatus_to_exitcode(status)}) + "\n").encode())


def _forked(request, report_fd, nonce_fd, output_fd):
    code = 1
    try:
        os.setsid()
        _dumpable(1)
        os.dup2(output_fd, 1)
        os.dup2(output_fd, 2)
        os.close(output_fd)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.chdir(request["repo"])
        os.environ.clear()
        os.environ.update(request["environment"])
        code = run_session(report_fd, nonce_fd, request["repo"], request["args"], request["plan"])
    except SystemExit as error:
        code = error.code if isinstance(error.code, int) else 1
    except BaseException:  # noqa: BLE001 - whatever the code under test raised ends this process
        import traceback

        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def run_session(report_fd: int, nonce_fd: int, repo: str, args: list, plan_path: str) -> int:
    """One pytest session on ``repo`` with the grader's plan; out: pytest's exit code.

    Everything the grader relies on is bound here, before any repository code runs: the helpers below
    are factories whose closures hold their own references, so that code replacing this script's
    globals (``__main__``) later changes nothing the session calls."""
    nonce = os.read(nonce_fd, 128).decode()
    os.close(nonce_fd)
    with open(plan_path, encoding="utf-8") as handle:
        plan = json.load(handle)
    os.unlink(plan_path)

    import _pytest.python
    import _pytest.runner
    import pytest
    from _pytest.assertion.rewrite import rewrite_asserts

    hidden_tests = _load_source("passband_hidden_tests", plan["prepare_source"])
    test_guard = _load_source("passband_test_guard", plan["guard_source"])
    record = _recorder(report_fd, nonce)
    sessions = []

    def report_tampering(nodeid, evidence):
        record(event="tampered", id=nodeid, evidence=evidence)
        for session in sessions:  # the verdict is decided: the remaining tests would only cost time
            session.shouldstop = "the grader found the tests tampered with"

    guard = test_guard.Guard(report_tampering, plan["sentinel"])
    compiled, summary = _compile_files(plan, repo, hidden_tests, rewrite_asserts)
    canary_names = {qualname.rpartition(".")[2] for entry in summary.values() for qualname in entry["canaries"]}
    # What the grader expects, recorded before any repository code can run.
    record(event="plan", files=summary)
    completed = set()
    ours = {}  # id(module namespace) -> the module
    plugin = _grader_plugin(
        record=record,
        changed_internals=_internals_watch(_pytest.python, _pytest.runner),
        load_module=_module_loader(repo=repo, compiled=compiled, guard=guard, record=record, ours=ours),
        wrap_items=_items_wrapper(
            record=record, guard=guard, canary_names=canary_names, completed=completed, ours=ours
        ),
        compiled=compiled,
        completed=completed,
        sessions=sessions,
    )
    sys.path.insert(0, repo)
    os.chdir(repo)
    code = pytest.main(args, plugins=[plugin])
    record(event="exit", code=int(code))
    return int(code)


def _recorder(report_fd, nonce):
    """``record(**fields)``: one JSON line with the nonce on the report pipe."""
    write = os.write
    dumps = json.dumps

    def record(**fields):
        fields["nonce"] = nonce
        write(report_fd, (dumps(fields) + "\n").encode())

    return record


def _compile_files(plan, repo, hidden_tests, rewrite_asserts):
    """The plan's hidden test files prepared (renamed, strict, canaries) and compiled with pytest's
    assertion rewrite: ({absolute path: (prepared, code) or the SyntaxError}, {path: what the grader
    expects of it})."""
    compiled = {}
    summary = {}
    for number, entry in enumerate(plan["files"]):
        path = os.path.join(repo, entry["path"])
        try:
            prepared = hidden_tests.prepare(
                entry["source"],
                suffix=plan["suffix"],
                canaries=entry["canaries"],
                sentinel=plan["sentinel"],
                seed=plan["seed"] + number,
            )
            rewrite_asserts(prepared.tree, entry["source"].encode("utf-8"), path, None)
            compiled[path] = (prepared, compile(prepared.tree, path, "exec", dont_inherit=True))
        except SyntaxError as error:
            compiled[path] = error
            continue
        summary[entry["path"]] = {"original": entry["original"], "tests": prepared.tests, "canaries": prepared.canaries}
    return compiled, summary


def _internals_watch(python, runner):
    """``changed_internals()``: the names of pytest's internals that run a test which are no longer the
    functions they were when this was called."""
    function_type = python.Function
    guarded = {
        "Function.runtest": function_type.runtest,
        "pytest_pyfunc_call": python.pytest_pyfunc_call,
        "call_and_report": runner.call_and_report,
        "runtestprotocol": runner.runtestprotocol,
    }
    guarded_now = {
        "Function.runtest": lambda: function_type.runtest,
        "pytest_pyfunc_call": lambda: python.pytest_pyfunc_call,
        "call_and_report": lambda: runner.call_and_report,
        "runtestprotocol": lambda: runner.runtestprotocol,
    }

    def changed_internals():
        return sorted(name for name, original in guarded.items() if guarded_now[name]() is not original)

    return changed_internals


def _module_loader(*, repo, compiled, guard, record, ours):
    """``load_module(path)``: a hidden test module, executed from its compiled code by the guard (never
    read from disk or ``sys.modules``), its problems recorded as tampering; it joins ``ours``."""
    import importlib

    import _pytest.pathlib

    def load_module(path):
        entry = compiled[path]
        if isinstance(entry, SyntaxError):
            raise entry
        prepared, code = entry
        package = _pytest.pathlib.resolve_package_path(_pytest.pathlib.Path(path))
        root = str(package.parent) if package is not None else os.path.dirname(path)
        relative = os.path.relpath(path[:-3], root)
        name = relative.replace(os.sep, ".")
        if root not in sys.path:
            sys.path.insert(0, root)
        parent = importlib.import_module(name.rpartition(".")[0]) if "." in name else None
        module, problems = guard.load(name=name, path=path, code=code, prepared=prepared, parent=parent)
        for problem in problems:
            record(event="tampered", id=os.path.relpath(path, repo), evidence=problem)
        ours[id(module.__dict__)] = module
        return module

    return load_module


def _items_wrapper(*, record, guard, canary_names, completed, ours):
    """``wrap_items(config, items)``: one case of each canary kept, then each collected test of our modules
    wrapped by the guard and marked in ``completed`` when it returns; the rest recorded as unwrapped."""
    import inspect

    import _pytest.python

    function_type = _pytest.python.Function

    def canary_failure(excinfo, style=None):
        return "the canary's assertion failed, as it must"

    def completing(function, nodeid):
        def passband_test(*args, **kwargs):
            result = function(*args, **kwargs)
            completed.add(nodeid)
            return result

        passband_test.__wrapped__ = function  # type: ignore[attr-defined]
        return passband_test

    def wrap_items(config, items):
        # One case of each canary is enough: the others would only cost time.
        seen, dropped = set(), []
        for item in list(items):
            name = getattr(item, "originalname", None)
            if name in canary_names and (item.parent.nodeid, name) in seen:
                items.remove(item)
                dropped.append(item)
            seen.add((item.parent.nodeid, name))
        if dropped:
            config.hook.pytest_deselected(items=dropped)
        collected = []
        for item in items:
            obj = getattr(item, "obj", None)
            function = getattr(obj, "__func__", obj)
            module = getattr(item, "module", None)
            if (
                type(item) is not function_type
                or not inspect.isfunction(function)
                or inspect.iscoroutinefunction(function)
                or id(getattr(module, "__dict__", None)) not in ours
            ):
                record(event="unwrapped", id=item.nodeid)
                continue
            collected.append(item.nodeid)
            if getattr(item, "originalname", None) in canary_names:
                # A canary fails by design: its traceback is never read, so none is formatted.
                item.repr_failure = canary_failure
            params = dict(item.callspec.params) if hasattr(item, "callspec") else {}
            item.obj = completing(guard.wrap(obj, item.nodeid, params), item.nodeid)
        record(event="collected", ids=collected)

    return wrap_items


def _grader_plugin(*, record, changed_internals, load_module, wrap_items, compiled, completed, sessions):
    """The pytest plug-in that collects the hidden test files through ``load_module``, wraps their tests
    (``wrap_items``) and records each report, with whether pytest's internals changed."""
    import pytest

    class GraderModule(pytest.Module):
        def _getobj(self):
            module = load_module(str(self.path))
            self.config.pluginmanager.consider_module(module)
            return module

    class PassbandGrader:
        @pytest.hookimpl(tryfirst=True)
        def pytest_pycollect_makemodule(self, module_path, parent):
            if str(module_path) in compiled:
                return GraderModule.from_parent(parent, path=module_path)
            return None

        @pytest.hookimpl(trylast=True)
        def pytest_collection_modifyitems(self, config, items):
            wrap_items(config, items)

        def pytest_sessionstart(self, session):
            sessions.append(session)

        def pytest_collectreport(self, report):
            if report.failed:
                record(event="collect_error", id=report.nodeid, text=str(report.longrepr)[-4000:])

        def pytest_runtest_logreport(self, report):
            record(
                event="report",
                id=report.nodeid,
                when=report.when,
                outcome=report.outcome,
                completed=report.nodeid in completed,
                changed=changed_internals(),
                text=str(report.longrepr)[-2000:] if report.failed else "",
            )

        def pytest_sessionfinish(self, session, exitstatus):
            record(event="finish", exitstatus=int(exitstatus), changed=changed_internals())

    return PassbandGrader()


main()
