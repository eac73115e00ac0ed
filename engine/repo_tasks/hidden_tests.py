"""The hidden tests as the grader compiles them: renamed per grade, comparisons made strict, canaries added.

Standard library only: ``pytest_child.py`` runs this source in the test process before any
repository code is importable, and the calling process imports it for the id mapping.

    >>> prepared = prepare(source, suffix="_pb1f2e", canaries=["test_c0ffee"], sentinel="\u2063x9")
    >>> prepared.tree        # the module to compile (pytest's assertion rewrite comes after)
    >>> prepared.tests       # {renamed qualname: original qualname} of every test it defines
    >>> prepared.canaries    # {canary qualname: the qualname of the test it copies}

* Renaming: module-level ``test*`` functions and ``Test*`` classes (and their ``test*`` methods) get
  ``suffix`` appended, with every reference to them, so a patch cannot aim at the upstream ids.
* Strict comparisons: ``assert a == b`` becomes ``assert __passband_eq__(a, b)`` (``!=`` likewise,
  ``__passband_ne__``); in a test function each such assert is followed by
  ``__passband_args__(names, values)``, which checks that the test's arguments it never reassigns are
  still the objects pytest passed (a frame write to a local is caught there).
* Canaries: copies of up to ``len(canaries)`` tests whose first ``==`` assert compares against
  ``__passband_wrong__(b)``, a value that differs from ``b``: a canary that passes means the harness
  or the comparisons were subverted.
"""

from __future__ import annotations

import ast
import copy
import random
from dataclasses import dataclass, field

EQ = "__passband_eq__"
NE = "__passband_ne__"
WRONG = "__passband_wrong__"
ARGS = "__passband_args__"
HELPERS = (EQ, NE, WRONG, ARGS)
# Builtins the rewritten asserts reach by name (pytest's rewrite raises AssertionError, calls locals()).
ALWAYS_USED_BUILTINS = ("AssertionError", "locals", "globals")


@dataclass
class Prepared:
    """One hidden test file, ready to compile."""

    tree: ast.Module
    tests: dict[str, str] = field(default_factory=dict)
    canaries: dict[str, str] = field(default_factory=dict)
    bound: set[str] = field(default_factory=set)  # names the module binds at its top level
    declared_global: set[str] = field(default_factory=set)  # names some function rebinds (`global x`)
    star_import: bool = False
    used_builtins: set[str] = field(default_factory=set)


def is_test_function(name: str) -> bool:
    return name.startswith("test")


def is_test_class(name: str) -> bool:
    return name.startswith("Test")


def prepare(source: str, *, suffix: str, canaries: list[str], sentinel: str, seed: int = 0) -> Prepared:
    """``source`` parsed and transformed (module docstring). Raises SyntaxError as compile would."""
    tree = ast.parse(source)
    prepared = Prepared(tree=tree)
    _add_canaries(tree, canaries, prepared, seed=seed)
    renames = _rename(tree, suffix, prepared)
    copied = dict(prepared.canaries)
    prepared.tests = {new: original for original, new in renames.items() if original not in copied}
    prepared.canaries = {renames.get(canary, canary): original for canary, original in copied.items()}
    _Strict().visit(tree)
    ast.fix_missing_locations(tree)
    _read_names(tree, prepared)
    return prepared


def _candidates(tree: ast.Module) -> list[tuple[list[ast.stmt], ast.FunctionDef, str]]:
    """(body holding it, function, qualname) of each test with an ``==`` assert and no skip/xfail mark."""
    found = []
    places: list[tuple[list[ast.stmt], str]] = [(tree.body, "")]
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and is_test_class(node.name):
            places.append((node.body, node.name + "."))
    for body, prefix in places:
        for node in body:
            if not isinstance(node, ast.FunctionDef) or not is_test_function(node.name):
                continue
            marks = " ".join(ast.unparse(decorator) for decorator in node.decorator_list)
            if "skip" in marks or "xfail" in marks or _first_eq_assert(node) is None:
                continue
            found.append((body, node, prefix + node.name))
    return found


def _first_eq_assert(function: ast.FunctionDef) -> ast.Assert | None:
    for node in ast.walk(function):
        if isinstance(node, ast.Assert) and _single_compare(node.test, ast.Eq):
            return node
    return None


def _single_compare(test: ast.expr, operator: type) -> bool:
    return isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], operator)


def _add_canaries(tree: ast.Module, names: list[str], prepared: Prepared, *, seed: int) -> None:
    candidates = _candidates(tree)
    chosen = random.Random(seed).sample(candidates, min(len(names), len(candidates)))
    for name, (body, function, qualname) in zip(names, chosen):
        canary = copy.deepcopy(function)
        canary.name = name
        target = _first_eq_assert(canary)
        assert target is not None and isinstance(target.test, ast.Compare)
        right = target.test.comparators[0]
        target.test.comparators[0] = ast.copy_location(ast.Call(ast.Name(WRONG, ast.Load()), [right], []), right)
        body.insert(body.index(function) + 1, canary)
        prefix = qualname.rsplit(".", 1)[0] + "." if "." in qualname else ""
        prepared.canaries[prefix + name] = qualname


def _rename(tree: ast.Module, suffix: str, prepared: Prepared) -> dict[str, str]:
    """Append ``suffix`` to the module's tests and test classes; out: {original qualname: new}."""
    renamed: dict[str, str] = {}
    top: dict[str, str] = {}
    methods: dict[str, str] = {}
    canary_leaves = {qualname.rsplit(".", 1)[-1] for qualname in prepared.canaries}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and is_test_function(node.name):
            top[node.name] = node.name + suffix if node.name not in canary_leaves else node.name
            renamed[node.name] = top[node.name]
        elif isinstance(node, ast.ClassDef) and is_test_class(node.name):
            top[node.name] = node.name + suffix
            for member in node.body:
                if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)) and is_test_function(member.name):
                    new = member.name + suffix if member.name not in canary_leaves else member.name
                    methods[member.name] = new
                    renamed[f"{node.name}.{member.name}"] = f"{top[node.name]}.{new}"
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            node.name = top.get(node.name, methods.get(node.name, node.name))
        elif isinstance(node, ast.Name) and node.id in top:
            node.id = top[node.id]
        elif isinstance(node, ast.Attribute) and node.attr in methods:
            node.attr = methods[node.attr]
    return renamed


class _Strict(ast.NodeTransformer):
    """``assert a == b`` / ``!=`` through the grader's comparison; the argument check after each."""

    def __init__(self) -> None:
        self.arguments: list[list[str]] = []

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        stored = {
            child.id
            for child in ast.walk(node)
            if isinstance(child, ast.Name) and isinstance(child.ctx, (ast.Store, ast.Del))
        }
        names = [argument.arg for argument in node.args.args + node.args.kwonlyargs if argument.arg != "self"]
        self.arguments.append([name for name in names if name not in stored] if is_test_function(node.name) else [])
        self.generic_visit(node)
        self.arguments.pop()
        return node

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Assert(self, node: ast.Assert) -> ast.AST | list[ast.AST]:
        helper = EQ if _single_compare(node.test, ast.Eq) else NE if _single_compare(node.test, ast.NotEq) else None
        if helper is None:
            return node
        assert isinstance(node.test, ast.Compare)
        call = ast.Call(ast.Name(helper, ast.Load()), [node.test.left, node.test.comparators[0]], [])
        node.test = ast.copy_location(call, node.test)
        arguments = self.arguments[-1] if self.arguments else []
        if not arguments:
            return node
        check = ast.Expr(
            ast.Call(
                ast.Name(ARGS, ast.Load()),
                [
                    ast.Tuple([ast.Constant(name) for name in arguments], ast.Load()),
                    ast.Tuple([ast.Name(name, ast.Load()) for name in arguments], ast.Load()),
                ],
                [],
            )
        )
        return [node, ast.copy_location(check, node)]


def _read_names(tree: ast.Module, prepared: Prepared) -> None:
    """The names the module binds at top level, declares global, and the builtins it reads."""
    for node in tree.body:
        for child in ast.walk(node) if not isinstance(node, (ast.FunctionDef, ast.ClassDef)) else [node]:
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                prepared.bound.add(child.name)
            elif isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store):
                prepared.bound.add(child.id)
            elif isinstance(child, (ast.Import, ast.ImportFrom)):
                for alias in child.names:
                    if alias.name == "*":
                        prepared.star_import = True
                    else:
                        prepared.bound.add(alias.asname or alias.name.split(".")[0])
    loaded = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            prepared.declared_global.update(node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            loaded.add(node.id)
    prepared.used_builtins = (loaded - prepared.bound - set(HELPERS)) | set(ALWAYS_USED_BUILTINS)


def map_test_id(test_id: str, *, files: dict[str, str], names: dict[str, str]) -> str:
    """A collected id (renamed file and names) back to the task's (``files``: {renamed: original};
    ``names``: {renamed part: original part}). Ids of other files come back unchanged."""
    path, _, rest = test_id.partition("::")
    if path not in files:
        return test_id
    parts = []
    for part in rest.split("::") if rest else []:
        name, bracket, params = part.partition("[")
        parts.append(names.get(name, name) + bracket + params)
    return "::".join([files[path], *parts])
