"""The test process: pytest, with Passband's recording plug-in, on the patched repository.

Runs inside the sandbox as a child of ``runner_program.py`` (``python -I -B pytest_child.py
REPORT_FD NONCE_FD REPO ARGS_JSON PATH_JSON``). Standard library and pytest only. The model's code runs in
this process (it is what the tests import), so nothing here is trusted for the verdict by itself:
the runner and the grader require evidence that tampering removes rather than forges:

* a test counts only with a ``call`` report that passed AND a completion mark written by a
  wrapper around the test function itself, after it returned: replacing pytest's runner, its
  ``pytest_pyfunc_call`` or swallowing the test's exception leaves no mark;
* the session must end (a ``finish`` record): ``sys.exit``/``os._exit`` from the code under test
  leaves none;
* the records carry a nonce read from a pipe before any repository code is imported;
* pytest and its own modules are imported before the repository joins ``sys.path``, so a
  planted ``pytest.py`` or ``_pytest/`` is never imported.
"""

import json
import os
import sys


def main() -> None:
    report_fd, nonce_fd, repo, args = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], json.loads(sys.argv[4])
    # The sandbox's own interpreter paths (the standard library and the installed packages);
    # the script's folder and the current directory are not among them.
    sys.path[:] = json.loads(sys.argv[5])
    nonce = os.read(nonce_fd, 128).decode()
    os.close(nonce_fd)
    write = os.write
    dumps = json.dumps

    import inspect

    import _pytest.python
    import _pytest.runner
    import pytest

    function_type = _pytest.python.Function
    guarded = {
        "Function.runtest": function_type.runtest,
        "pytest_pyfunc_call": _pytest.python.pytest_pyfunc_call,
        "call_and_report": _pytest.runner.call_and_report,
        "runtestprotocol": _pytest.runner.runtestprotocol,
    }
    guarded_now = {
        "Function.runtest": lambda: function_type.runtest,
        "pytest_pyfunc_call": lambda: _pytest.python.pytest_pyfunc_call,
        "call_and_report": lambda: _pytest.runner.call_and_report,
        "runtestprotocol": lambda: _pytest.runner.runtestprotocol,
    }

    def record(**fields):
        fields["nonce"] = nonce
        write(report_fd, (dumps(fields) + "\n").encode())

    completed = set()

    def changed_internals():
        return sorted(name for name, original in guarded.items() if guarded_now[name]() is not original)

    class PassbandGrader:
        @pytest.hookimpl(trylast=True)
        def pytest_collection_modifyitems(self, items):
            for item in items:
                obj = getattr(item, "obj", None)
                if type(item) is not function_type or not inspect.isfunction(obj) or inspect.iscoroutinefunction(obj):
                    record(event="unwrapped", id=item.nodeid)
                    continue
                item.obj = _wrapped(obj, item.nodeid)

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

    def _wrapped(function, nodeid):
        def passband_test(*args, **kwargs):
            result = function(*args, **kwargs)
            completed.add(nodeid)
            return result

        passband_test.__wrapped__ = function  # type: ignore[attr-defined]
        return passband_test

    sys.path.insert(0, repo)
    os.chdir(repo)
    code = pytest.main(args, plugins=[PassbandGrader()])
    record(event="exit", code=int(code))
    sys.exit(int(code))


main()
