"""Small, deterministic AST mutants of a Python program: the raw material of the weak-test check
(engine/verifiers/mutation.py). Standard library only; nothing here runs the code it mutates.

Each mutant changes one place: an arithmetic, bitwise or augmented-assignment operator (``+`` to ``-``,
``*`` to ``/``, ...), a comparison (``<`` to ``<=``, ``==`` to ``!=``, ``in`` to ``not in``, ...), ``and`` to
``or``, a dropped ``not`` or unary minus, a number plus one, ``True`` to ``False``, a string wrapped in
``XX``, an ``if`` whose condition is negated, ``break`` to ``continue``. Docstrings and f-string text are
left alone. When a program has more places than asked for, the chosen ones are spread evenly over it.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass

_BINARY: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
    ast.FloorDiv: ast.Div,
    ast.Mod: ast.FloorDiv,
    ast.Pow: ast.Mult,
    ast.LShift: ast.RShift,
    ast.RShift: ast.LShift,
    ast.BitAnd: ast.BitOr,
    ast.BitOr: ast.BitAnd,
    ast.BitXor: ast.BitAnd,
}
_COMPARE: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}
_SYMBOLS = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**",
    ast.LShift: "<<", ast.RShift: ">>", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.Lt: "<",
    ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=", ast.Is: "is", ast.IsNot: "is not",
    ast.In: "in", ast.NotIn: "not in",
}  # fmt: skip


@dataclass(frozen=True)
class Mutant:
    """One mutant: ``label`` says what changed and where (``line 4: < -> <=``), ``source`` is the whole
    mutated program."""

    label: str
    source: str


@dataclass(frozen=True)
class _Site:
    node_index: int  # the node's position in ast.walk order of a fresh parse
    variant: int  # which of the node's mutations (a comparison's operator position)
    label: str


def _symbol(op: ast.AST) -> str:
    return _SYMBOLS.get(type(op), type(op).__name__)


def _node_sites(node: ast.AST, parent: ast.AST | None) -> Iterator[tuple[int, str]]:
    """(variant, description) of each mutation of `node`."""
    if isinstance(node, (ast.BinOp, ast.AugAssign)) and type(node.op) in _BINARY:
        yield 0, f"{_symbol(node.op)} -> {_symbol(_BINARY[type(node.op)]())}"
    elif isinstance(node, ast.Compare):
        for position, op in enumerate(node.ops):
            if type(op) in _COMPARE:
                yield position, f"{_symbol(op)} -> {_symbol(_COMPARE[type(op)]())}"
    elif isinstance(node, ast.BoolOp):
        yield 0, "and -> or" if isinstance(node.op, ast.And) else "or -> and"
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.USub)):
        yield 0, "`not` dropped" if isinstance(node.op, ast.Not) else "unary `-` dropped"
    elif isinstance(node, ast.Constant):
        yield from _constant_sites(node, parent)
    elif isinstance(node, (ast.If, ast.IfExp)):
        yield 0, "condition negated"
    elif isinstance(node, ast.Break):
        yield 0, "break -> continue"


def _constant_sites(node: ast.Constant, parent: ast.AST | None) -> Iterator[tuple[int, str]]:
    value = node.value
    if isinstance(value, bool):
        yield 0, f"{value} -> {not value}"
    elif isinstance(value, (int, float)):
        yield 0, f"{value!r} -> {value + 1!r}"
    elif isinstance(value, str) and not isinstance(parent, (ast.Expr, ast.JoinedStr, ast.FormattedValue)):
        yield 0, "string wrapped in XX"


def _mutated(node: ast.AST, variant: int) -> ast.AST:
    """A copy of `node` with mutation `variant` applied."""
    if isinstance(node, (ast.BinOp, ast.AugAssign)):
        node.op = _BINARY[type(node.op)]()
    elif isinstance(node, ast.Compare):
        node.ops[variant] = _COMPARE[type(node.ops[variant])]()
    elif isinstance(node, ast.BoolOp):
        node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
    elif isinstance(node, ast.UnaryOp):
        return node.operand
    elif isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, bool):
            node.value = not value
        elif isinstance(value, str):
            node.value = f"XX{value}XX"
        elif isinstance(value, (int, float)):
            node.value = value + 1
    elif isinstance(node, (ast.If, ast.IfExp)):
        node.test = ast.UnaryOp(op=ast.Not(), operand=node.test)
    elif isinstance(node, ast.Break):
        return ast.Continue()
    return node


class _Replace(ast.NodeTransformer):
    def __init__(self, target: ast.AST, change: Callable[[ast.AST], ast.AST]) -> None:
        self.target, self.change = target, change

    def visit(self, node: ast.AST) -> ast.AST:
        if node is self.target:
            return self.change(node)
        return self.generic_visit(node)


def _sites(tree: ast.Module, *, first_line: int) -> list[_Site]:
    parents = {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
    sites = []
    for index, node in enumerate(ast.walk(tree)):
        line = getattr(node, "lineno", None)
        if line is None or line < first_line:
            continue
        for variant, what in _node_sites(node, parents.get(node)):
            sites.append((line, getattr(node, "col_offset", 0), variant, _Site(index, variant, f"line {line}: {what}")))
    return [site for *_, site in sorted(sites, key=lambda item: item[:3])]


def spread(count: int, limit: int) -> list[int]:
    """`limit` indices out of range(count) spread evenly (all of them when count <= limit)."""
    if count <= limit:
        return list(range(count))
    return sorted({index * count // limit for index in range(limit)})


def mutants_of(source: str, *, limit: int, first_line: int = 1) -> list[Mutant]:
    """Up to `limit` distinct mutants of `source`, mutating only lines >= `first_line`, in source order.

    In: Python source. Out: mutants whose programs differ from the original (as ``ast.unparse`` prints it)
    and from each other. Raises SyntaxError when `source` is not Python.
    """
    tree = ast.parse(source)
    original = ast.unparse(tree)
    sites = _sites(tree, first_line=first_line)
    seen = {original}
    mutants = []
    for index in spread(len(sites), limit):
        site = sites[index]
        fresh = ast.parse(source)
        target = list(ast.walk(fresh))[site.node_index]
        changed = _Replace(target, functools.partial(_mutated, variant=site.variant)).visit(fresh)
        program = ast.unparse(ast.fix_missing_locations(changed))
        if program not in seen:
            seen.add(program)
            mutants.append(Mutant(label=site.label, source=program + "\n"))
    return mutants


def reprinted(source: str) -> str:
    """`source` as the mutants print it (``ast.unparse``: comments and layout gone), for the control run."""
    return ast.unparse(ast.parse(source)) + "\n"
