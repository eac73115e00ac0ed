"""The test process's guard: comparisons that cannot be faked, canary values, and the checks that the
tests that run are the grader's.

Standard library only. ``pytest_child.py`` executes this source before any repository code can be
imported, so every builtin and type it captures here is the real one. In:

* ``comparisons(sentinel)``: the helpers the rewritten tests call (``hidden_tests.py`` names them);
* ``Guard.load(...)``: a hidden test module built from the grader's code object, never from disk or
  ``sys.modules``; it returns the problems seen right after the module ran (names it does not bind,
  test functions whose code is not the grader's, changed builtins);
* ``Guard.wrap(...)``: the test function as pytest calls it; before and after the call it checks the
  function's ``__code__`` and ``__globals__``, the module's globals and the builtins it reads, the
  parametrized arguments, and that no tracer is installed. A problem is reported (``report``) and
  raised as ``Tampered``.
"""

import builtins
import sys
import types

MISSING = object()
SCALARS = (bool, int, float, complex, str, bytes, type(None))
CONTAINERS = (list, tuple, dict, set, frozenset)
MODULE_DUNDERS = frozenset(
    {"__name__", "__file__", "__builtins__", "__doc__", "__loader__", "__spec__", "__package__", "__cached__"}
)
MAX_DEPTH = 64


class Tampered(Exception):
    """The grader's check found the tests or the comparisons changed at run time."""


def comparisons(sentinel):
    """{helper name: function} for the rewritten tests; ``sentinel`` makes the canaries' wrong values."""
    kind_of, is_subclass, length, zipped = type, issubclass, len, zip
    bases = SCALARS + CONTAINERS
    not_implemented = NotImplemented

    def base_of(value):
        kind = kind_of(value)
        if kind in bases:
            return kind
        for base in bases:
            if is_subclass(kind, base) and kind.__eq__ is base.__eq__ and kind.__hash__ is base.__hash__:
                return base
        return None

    def builtin_valued(value, depth=0):
        """Made only of builtin value types (or subclasses that keep the builtin comparison)."""
        base = base_of(value)
        if base is None or depth > MAX_DEPTH:
            return False
        if base in (list, tuple, set, frozenset):
            return all(builtin_valued(item, depth + 1) for item in base.__iter__(value))
        if base is dict:
            return all(
                builtin_valued(key, depth + 1) and builtin_valued(item, depth + 1) for key, item in dict.items(value)
            )
        return True

    def approx(value):
        kind = kind_of(value)
        return kind.__module__.startswith("_pytest.") and kind.__name__.startswith("Approx")

    def opinion(left, right, method):
        answer = getattr(kind_of(left), method)(left, right)
        return answer is not not_implemented and bool(answer)

    def strict_eq(actual, expected, depth=0):
        if approx(expected):  # pytest.approx on the right: its own comparison decides
            return opinion(expected, actual, "__eq__")
        if builtin_valued(actual) or builtin_valued(expected):
            return builtin_valued(actual) and builtin_valued(expected) and actual == expected
        left, right = base_of(actual), base_of(expected)
        if depth < MAX_DEPTH and left is right and left in (list, tuple):
            return length(actual) == length(expected) and all(
                strict_eq(x, y, depth + 1) for x, y in zipped(list.__iter__(actual), list.__iter__(expected))
            )
        if depth < MAX_DEPTH and left is right is dict:
            return length(actual) == length(expected) and all(
                dict.__contains__(actual, key) and strict_eq(dict.__getitem__(actual, key), item, depth + 1)
                for key, item in dict.items(expected)
            )
        return opinion(actual, expected, "__eq__") and opinion(expected, actual, "__eq__")

    def strict_ne(actual, expected):
        if builtin_valued(actual) or builtin_valued(expected):
            return not (builtin_valued(actual) and builtin_valued(expected)) or actual != expected
        return opinion(actual, expected, "__ne__") and opinion(expected, actual, "__ne__")

    def wrong(value):
        """A value that differs from ``value`` (canaries compare with it)."""
        kind = kind_of(value)
        if kind is bool:
            return not value
        if kind is int:
            return value + 7919 * 104729
        if kind is float:
            return value * 1.5 + 1.0 if value == value else value
        if kind in (str, bytes):
            return value + (sentinel if kind is str else sentinel.encode("utf-8"))
        if kind in (list, tuple):
            return value + kind((sentinel,))
        if kind is dict:
            return {**value, sentinel: sentinel}
        if kind in (set, frozenset):
            return value | {sentinel}
        if value is None:
            return sentinel
        raise TypeError(f"no canary value for {kind.__name__}")

    return {"__passband_eq__": strict_eq, "__passband_ne__": strict_ne, "__passband_wrong__": wrong}


class ModuleState:
    """What one hidden test module looked like when it finished running (the reference for later checks)."""

    def __init__(self, module, prepared, codes, builtin_names):
        self.module = module
        self.namespace = module.__dict__
        self.prepared = prepared
        self.codes = codes  # {id: code object} of every code object the grader compiled
        self.builtin_names = builtin_names
        self.snapshot = {}
        self.functions = []  # (function, its code) defined by this module


class Guard:
    """One per test process: loads the hidden modules and checks them at call time."""

    def __init__(self, report, sentinel):
        self.report = report  # report(nodeid, evidence): the record of a tampering found
        self.builtins = builtins.__dict__
        self.builtins_at_start = dict(builtins.__dict__)
        self.helpers = comparisons(sentinel)
        self.helpers["__passband_args__"] = self.check_arguments
        self.states = {}  # id(namespace) -> ModuleState
        self.current = [None, None]  # the running test: [kwargs, nodeid]
        self.get_trace, self.get_profile = sys.gettrace, sys.getprofile
        self.function_type = types.FunctionType

    def load(self, *, name, path, code, prepared, parent=None):
        """Run the grader's ``code`` as module ``name``. Out: (module, [problems right after it ran])."""
        module = types.ModuleType(name)
        module.__file__ = path
        module.__builtins__ = builtins
        namespace = module.__dict__
        namespace.update(self.helpers)
        sys.modules[name] = module
        if parent is not None:
            setattr(parent, name.rpartition(".")[2], module)
        codes = {}
        pending = [code]
        while pending:
            current = pending.pop()
            codes[id(current)] = current
            pending.extend(const for const in current.co_consts if isinstance(const, types.CodeType))
        used = sorted(name for name in prepared.used_builtins if name in self.builtins_at_start)
        state = ModuleState(module, prepared, codes, used)
        exec(code, namespace)
        problems = []
        for bound_name, value in list(namespace.items()):
            for qualname, function in self._functions_of(bound_name, value):
                if function.__globals__ is not namespace:
                    continue
                own = codes.get(id(function.__code__)) is function.__code__
                renamed = qualname.rpartition(".")[2].startswith("test") and function.__code__.co_qualname != qualname
                if not own or renamed:
                    problems.append(f"the code of {qualname} is not the grader's")
                state.functions.append((function, function.__code__))
        state.snapshot = dict(namespace)
        self.states[id(namespace)] = state
        problems += self.module_problems(state, initial=True)
        return module, problems

    def _functions_of(self, bound_name, value):
        """(qualname it is bound under, function) for a module global: functions, fixtures, class methods."""
        if isinstance(value, type):
            members = vars(value).items()
            return [(f"{bound_name}.{name}", item) for name, item in members if isinstance(item, self.function_type)]
        inner = getattr(value, "_fixture_function", None)
        return [(bound_name, item) for item in (value, inner) if isinstance(item, self.function_type)]

    def module_problems(self, state, *, initial=False):
        """Each way the module now differs from the grader's (names, code, builtins, tracer)."""
        problems = []
        namespace = state.namespace
        prepared = state.prepared
        if initial and not prepared.star_import:
            allowed = prepared.bound | MODULE_DUNDERS | set(self.helpers)
            extra = [name for name in namespace if name not in allowed and not name.startswith("@py")]
            if extra:
                problems.append("the test module holds names it does not define: " + ", ".join(sorted(extra)[:5]))
        if not initial:
            skip = prepared.declared_global
            changed = [
                name
                for name, value in state.snapshot.items()
                if name not in skip and namespace.get(name, MISSING) is not value
            ]
            added = [name for name in namespace if name not in state.snapshot and name not in skip]
            if changed or added:
                problems.append("the test module's globals changed: " + ", ".join(sorted(changed + added)[:5]))
        for function, expected in state.functions:
            if function.__code__ is not expected:
                problems.append(f"the code of {function.__qualname__} is not the grader's")
        for name in state.builtin_names:
            if self.builtins.get(name, MISSING) is not self.builtins_at_start[name]:
                problems.append(f"the builtin {name} was replaced")
        if self.get_trace() is not None or self.get_profile() is not None:
            problems.append("a tracer or profiler is installed in the test process")
        return problems

    def check_arguments(self, names, values):
        """After each ``==``/``!=`` assert: the arguments the test never reassigns are pytest's objects."""
        kwargs, nodeid = self.current
        if kwargs is None:
            return
        for name, value in zip(names, values):
            if kwargs.get(name, value) is not value:
                self._tampered(nodeid, f"the test's argument {name!r} was rewritten while it ran")
        if self.get_trace() is not None or self.get_profile() is not None:
            self._tampered(nodeid, "a tracer or profiler is installed in the test process")

    def _tampered(self, nodeid, evidence):
        self.report(nodeid, evidence)
        raise Tampered(evidence)

    def wrap(self, function, nodeid, params):
        """The test as pytest calls it: checked before and after; ``params``: its parametrized values."""
        state = self.states.get(id(getattr(function, "__globals__", None)))
        code = function.__code__
        guard = self

        def verify():
            problems = []
            if state is None or function.__globals__ is not state.namespace:
                problems.append("the test function does not belong to the grader's module")
            elif function.__code__ is not code or state.codes.get(id(code)) is not code:
                problems.append(f"the code of {code.co_qualname} is not the grader's")
            if state is not None:
                problems += guard.module_problems(state)
            return problems

        def passband_test(*args, **kwargs):
            for name, value in params.items():
                if name in kwargs and kwargs[name] is not value:
                    guard._tampered(nodeid, f"the parametrized argument {name!r} was replaced")
            problems = verify()
            if problems:
                guard._tampered(nodeid, "; ".join(problems))
            guard.current[:] = [kwargs, nodeid]
            try:
                result = function(*args, **kwargs)
            finally:
                guard.current[:] = [None, None]
            problems = verify()
            if problems:
                guard._tampered(nodeid, "; ".join(problems))
            return result

        passband_test.__wrapped__ = function
        return passband_test
