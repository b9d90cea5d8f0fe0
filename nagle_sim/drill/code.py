"""packetdrill's ``%{ … }%`` code blocks, evaluated by a small interpreter (a script is
data, never executed as Python).

What packetdrill does (code.c): at each block it takes a getsockopt(TCP_INFO) snapshot;
when the script has run to its end it writes every snapshot (``tcpi_* = value`` lines and
the kernel's constants: TCP_ESTABLISHED …, TCP_CA_Open …, TCPI_OPT_* …) followed by its
block into one Python file, blocks in script order, and runs it. So:

- blocks are checked after every packet and call (a packet failure is reported first);
- a name a block assigns (``cwnd = 58``, ``cwnd += 1``) is seen by later blocks;
- each block's text is stripped of spaces and tabs at both ends and followed by two
  newlines, so a block may end in ``;\\`` (a backslash-newline joins it to an empty line);
- ``print(…)`` prints; ``assert test, message`` fails the script with the message.

The subset here: assert, print, assignment and augmented assignment to plain names,
``pass``, and expressions of numbers, names, arithmetic, bitwise operators, comparisons
(``in`` over tuples), ``and``/``or``/``not`` and tuples. A ``tcpi_*`` name the model does
not provide makes the script unsupported; a name never defined, a division by zero or
a type error is the script's error (`CodeError`), not the model's; valid Python outside
the subset (``import``, calls, loops) is unsupported.
Values are bounded (2**256) so a script cannot make a huge number.
Standard library only.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import UserError

MAX_CODE_CHARS = 4096
"""A code block longer than this is refused before it is parsed (upstream blocks are a few
lines of asserts)."""
MAX_CODE_DEPTH = 64
"""The deepest expression tree a code block may have: the evaluator recurses once per
level."""
MAX_MAGNITUDE = 1 << 256
"""No value may grow past this (``x *= x`` over many blocks would otherwise eat memory)."""
MAX_SHIFT = 256

# include/net/tcp_states.h, include/net/tcp.h (enum tcp_ca_state), include/uapi/linux/tcp.h:
# the names code.c's write_symbols defines before each snapshot.
TCP_STATES = {"ESTABLISHED": 1, "SYN_SENT": 2, "SYN_RECV": 3, "FIN_WAIT1": 4, "FIN_WAIT2": 5,
              "TIME_WAIT": 6, "CLOSE": 7, "CLOSE_WAIT": 8, "LAST_ACK": 9, "LISTEN": 10,
              "CLOSING": 11}
CONSTANTS: dict[str, int] = {
    **{f"TCP_{name}": n for name, n in TCP_STATES.items()},
    "TCP_CA_Open": 0, "TCP_CA_Disorder": 1, "TCP_CA_CWR": 2, "TCP_CA_Recovery": 3,
    "TCP_CA_Loss": 4,
    "TCPI_OPT_TIMESTAMPS": 1, "TCPI_OPT_SACK": 2, "TCPI_OPT_WSCALE": 4, "TCPI_OPT_ECN": 8,
    "TCPI_OPT_ECN_SEEN": 16, "TCPI_OPT_SYN_DATA": 32, "TCPI_OPT_USEC_TS": 64,
    "TCPI_OPT_TFO_CHILD": 128,
}


class CodeUnsupported(Exception):
    """The block names something the model cannot provide."""


class CodeError(UserError):
    """The block is not valid code, or its arithmetic or names fail (bad input: exit 2)."""


class CodeFailed(Exception):
    """An assertion failed."""


_CMP: dict[type, Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}
_BIN: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.BitXor: operator.xor,
    ast.LShift: operator.lshift, ast.RShift: operator.rshift}


def parse(text: str) -> ast.Module:
    """A block's text as packetdrill hands it to Python (stripped of spaces and tabs at
    both ends, two newlines after); `CodeError` if it is not valid or too big,
    `CodeUnsupported` if it is Python outside the subset."""
    body = text.strip(" \t")
    if len(body) > MAX_CODE_CHARS:
        raise CodeError(f"code block of {len(body):,} characters (limit {MAX_CODE_CHARS:,})")
    try:
        tree = ast.parse(body + "\n\n")
    except SyntaxError as exc:
        raise CodeError(f"code block: {exc.msg}") from None
    except (RecursionError, MemoryError):    # thousands of nested operators
        raise CodeError("code block: nested too deeply to parse") from None
    if _depth(tree) > MAX_CODE_DEPTH:
        raise CodeError(f"code block: expressions nested more than {MAX_CODE_DEPTH} deep")
    for stmt in tree.body:
        if not _statement_ok(stmt):
            raise CodeUnsupported(f"code block: {ast.unparse(stmt)[:60]!r} is outside the "
                            "supported subset (assert, print, assignments)")
    return tree


def _statement_ok(stmt: ast.stmt) -> bool:
    if isinstance(stmt, ast.Assert | ast.Pass):
        return True
    if isinstance(stmt, ast.Assign):
        return all(isinstance(t, ast.Name) for t in stmt.targets)
    if isinstance(stmt, ast.AugAssign):
        return isinstance(stmt.target, ast.Name) and type(stmt.op) in _BIN
    if isinstance(stmt, ast.Expr):
        call = stmt.value
        return (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
                and call.func.id == "print" and not call.keywords)
    return False


def _depth(tree: ast.AST) -> int:
    """How deep ``tree`` nests, measured without recursion (a 2000-term product is a tree
    2000 deep, and a recursive walk over it would overflow Python's stack)."""
    deepest = 0
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if depth <= MAX_CODE_DEPTH:          # deeper than the limit: no need to look on
            stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


def names_used(tree: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id != "print"}


@dataclass(slots=True)
class Interpreter:
    """One script's code blocks, run in order over their snapshots, sharing names."""

    known: frozenset[str]
    """The ``tcpi_*`` names the model provides (any other is unsupported)."""
    variables: dict[str, Any]

    @classmethod
    def new(cls, known: frozenset[str]) -> Interpreter:
        return cls(known=known, variables={})

    def run(self, tree: ast.Module, snapshot: Mapping[str, int],
            printed: Callable[[str], None]) -> None:
        """Run one block with ``snapshot``'s ``tcpi_*`` values (and the constants) in
        scope, as the file packetdrill writes has them just before the block."""
        self.variables.update(CONSTANTS)
        self.variables.update(snapshot)
        for stmt in tree.body:
            try:
                self._statement(stmt, printed)
            except (ArithmeticError, RecursionError, MemoryError, TypeError, ValueError) as exc:
                # division by zero, float overflow: the script's arithmetic, not the model's
                raise CodeError(f"code block: {ast.unparse(stmt)[:80]}: "
                                f"{type(exc).__name__}: {exc}") from None

    def _statement(self, stmt: ast.stmt, printed: Callable[[str], None]) -> None:
        if isinstance(stmt, ast.Assert):
            if not self._eval(stmt.test):
                shown = ", ".join(f"{n}={self.variables[n]}" for n in sorted(
                    names_used(stmt.test)) if n in self.variables)
                message = f" ({shown})" if shown else ""
                if stmt.msg is not None:
                    message = f": {_show(self._eval(stmt.msg))}{message}"
                raise CodeFailed(f"assertion failed: {ast.unparse(stmt.test)}{message}")
        elif isinstance(stmt, ast.Assign):
            value = self._eval(stmt.value)
            for target in stmt.targets:
                assert isinstance(target, ast.Name)
                self.variables[target.id] = value
        elif isinstance(stmt, ast.AugAssign):
            assert isinstance(stmt.target, ast.Name)
            old = self._name(stmt.target.id)
            self.variables[stmt.target.id] = self._binop(stmt.op, old, self._eval(stmt.value))
        elif isinstance(stmt, ast.Expr):
            assert isinstance(stmt.value, ast.Call)
            printed(" ".join(_show(self._eval(a)) for a in stmt.value.args))

    def _name(self, name: str) -> Any:
        if name in self.variables:
            return self.variables[name]
        if name.startswith("tcpi_") and name not in self.known:
            known = ", ".join(sorted(self.known))
            raise CodeUnsupported(f"{name} is not modelled (known: {known})")
        raise CodeError(f"code block: name {name!r} is not defined (Python's NameError)")

    def _binop(self, op: ast.operator, left: Any, right: Any) -> Any:
        if isinstance(op, ast.Mod) and isinstance(left, str):
            # an assert's message, 'cwnd is %d' % tcpi_snd_cwnd: plain conversions only,
            # so a width cannot build a huge string
            if not re.fullmatch(r"(?:[^%]|%%|%[-+ #0]?\d{0,2}[disxXf])*", left):
                raise CodeUnsupported(f"code block: a format other than %d, %s, %x, %f: "
                                      f"{left[:40]!r}")
            return left % right
        if not (_number(left) and _number(right)):
            raise CodeError(f"code block: {type(op).__name__} of {_show(left)} and "
                            f"{_show(right)}")
        if isinstance(op, ast.LShift | ast.RShift) and not 0 <= right <= MAX_SHIFT:
            raise CodeError(f"code block: shift by {right}")
        return _bounded(_BIN[type(op)](left, right))

    def _eval(self, node: ast.AST) -> Any:
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float | str):
            return node.value
        if isinstance(node, ast.Name):
            return self._name(node.id)
        if isinstance(node, ast.Tuple):
            return tuple(self._eval(e) for e in node.elts)
        if isinstance(node, ast.BinOp) and type(node.op) in _BIN:
            return self._binop(node.op, self._eval(node.left), self._eval(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            value = self._eval(node.operand)
            if not _number(value):
                raise CodeError(f"code block: sign of {_show(value)}")
            return -value if isinstance(node.op, ast.USub) else value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return not self._eval(node.operand)
        if isinstance(node, ast.BoolOp):
            # Python's short-circuit: `a and b` never evaluates b when a is false
            last: Any = None
            for v in node.values:
                last = self._eval(v)
                if bool(last) is not isinstance(node.op, ast.And):
                    return last
            return last
        if isinstance(node, ast.Compare) and all(type(op) in _CMP for op in node.ops):
            left = self._eval(node.left)
            for op, comp in zip(node.ops, node.comparators, strict=True):
                right = self._eval(comp)
                try:
                    if not _CMP[type(op)](left, right):
                        return False
                except TypeError:
                    raise CodeError(f"code block: cannot compare {_show(left)} with "
                                    f"{_show(right)}") from None
                left = right
            return True
        raise CodeUnsupported(f"code block: {ast.unparse(node)[:60]!r} is outside the "
                              "supported subset")


def _number(value: Any) -> bool:
    return isinstance(value, int | float)      # bool is an int, as in Python


def _bounded(value: Any) -> Any:
    if isinstance(value, int) and abs(value) > MAX_MAGNITUDE:
        raise CodeError("code block: a value beyond 2**256")
    return value


def _show(value: Any) -> str:
    return value if isinstance(value, str) else repr(value)
