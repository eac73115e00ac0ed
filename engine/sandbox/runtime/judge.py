"""The judge: runs the task's tests in the run's setup process, outside the program's interpreter.

The tests see the program's functions as ``Remote`` objects: calling one sends the arguments
by value to the program's process and brings the result back by value, as fresh builtin
objects (wire.py). So ``assert candidate(2) == 4`` compares two genuine ints here, with
Python's own ``int.__eq__``; nothing the program does in its own process (monkeypatching
``__main__`` or builtins, walking frames through ``gc``, replacing ``__eq__``, exiting early)
reaches this process or the report pipe, which only this process holds.

A value that cannot travel by value (an instance of the program's own class, a generator)
arrives as a Remote handle: the tests may call it, read its attributes and iterate over it,
but it equals only itself and has no truth value.
"""

from __future__ import annotations

import binascii
import builtins
import importlib
import importlib.util
import marshal
import os
import types
from typing import Any

from . import wire
from .program import describe_error, failing_line, flush_standard_streams

REPORT_FD, REPLIES_FD, CALLS_FD = 3, 4, 5
_BUILTIN_NAMES = frozenset(dir(builtins))
_exec = builtins.exec
_compile = builtins.compile


class ProgramGone(BaseException):
    """The program exited, crashed or broke the protocol: the tests cannot go on. A
    BaseException, so a test's ``except Exception`` cannot swallow it."""

    def __init__(self, event: dict) -> None:
        super().__init__(event.get("event"))
        self.event = event


class ProgramError(Exception):
    """An exception raised in the program that has no builtin counterpart here."""


class Remote:
    """A function or object that lives in the program's process."""

    __slots__ = ("_handle", "_link", "_type_name")
    _link: Link
    _handle: object
    _type_name: str

    def __init__(self, link: Link, handle: object, type_name: str) -> None:
        object.__setattr__(self, "_link", link)
        object.__setattr__(self, "_handle", handle)
        object.__setattr__(self, "_type_name", type_name)

    def __call__(self, *args: object, **kwargs: object) -> object:
        return self._link.call(self._handle, args, kwargs)

    def __getattr__(self, name: str) -> object:
        if name.startswith("__"):
            raise AttributeError(name)
        return self._link.request(["getattr", self._handle, name])

    def __iter__(self) -> Any:  # the program's iterator, a Remote
        return self._link.request(["iter", self._handle])

    def __next__(self) -> object:
        return self._link.request(["next", self._handle])

    def __eq__(self, other: object) -> bool:
        return type(other) is Remote and other._handle == self._handle

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(repr(self._handle))

    def __bool__(self) -> bool:
        raise TypeError(
            f"a {self._type_name} from the program has no truth value in the tests: "
            "only plain values (numbers, strings, lists, dicts, ...) can be checked"
        )

    def __repr__(self) -> str:
        return f"<program {self._type_name}>"


class Link:
    """The judge's end of the channel to the program."""

    def __init__(self, channel: wire.Channel) -> None:
        self.channel = channel
        self.gone: dict | None = None

    def _remote(self, key: int, type_name: str) -> Remote:
        return Remote(self, {"h": key, "n": type_name}, type_name)

    def _handle_for(self, value: object) -> object:
        if type(value) is Remote:
            return value._handle
        raise TypeError(f"tests can pass only plain values to the program, not {type(value).__name__}")

    def request(self, message: list) -> object:
        reply = self._exchange(message)
        return reply[1]

    def call(self, target: object, args: tuple, kwargs: dict) -> object:
        encoded_args = wire.encode(list(args), self._handle_for)
        encoded_kwargs = wire.encode(dict(kwargs), self._handle_for)
        reply = self._exchange(["call", target, encoded_args, encoded_kwargs])
        changed = reply[2] if len(reply) > 2 else []
        for entry in changed if type(changed) is list else []:
            _copy_back(args, entry)
        return reply[1]

    def names(self, wanted: list[str] | None) -> dict:
        reply = self._exchange(["names", wanted])
        return reply[1] if type(reply[1]) is dict else {}

    def _exchange(self, message: list) -> list:
        if self.gone is not None:
            raise ProgramGone(self.gone)
        try:
            payload = wire.dumps(message)
        except (ValueError, TypeError, RecursionError) as error:
            raise TypeError(f"cannot send these arguments to the program: {error}") from None
        try:
            self.channel.send(payload)
        except wire.ChannelClosed:
            pass  # the program may have said why before it went: read it
        try:
            reply = wire.decode(self.channel.receive(), self._remote)
        except wire.ChannelClosed:
            raise self._lost({"event": "program_died"}) from None
        except wire.ProtocolError as error:
            raise self._lost({"event": "program_error", "error": f"malformed reply: {error}"}) from None
        if type(reply) is not list or not reply or type(reply[0]) is not str:
            raise self._lost({"event": "program_error", "error": "malformed reply"})
        kind = reply[0]
        if kind in ("value", "names") and len(reply) >= 2:
            return reply
        if kind == "raise":
            raise _exception(reply)
        if kind == "syntax_error":
            line, text = (reply + [None, ""])[1:3]
            raise self._lost({"event": "syntax_error", "line": _int(line), "error": _text(text)})
        if kind in ("program_error", "exit"):
            _, text, line, source = (reply + [None, None, None, None])[1:5]
            raise self._lost(
                {"event": "program_error", "error": _text(text), "line": _int(line), "source": _text(source)}
            )
        raise self._lost({"event": "program_error", "error": "malformed reply"})

    def _lost(self, event: dict) -> ProgramGone:
        self.gone = event
        return ProgramGone(event)


def _int(value: object) -> int | None:
    return value if type(value) is int else None


def _text(value: object) -> str:
    return value[:300] if type(value) is str else ""


def _copy_back(args: tuple, entry: object) -> None:
    """Apply an argument the program changed in place to the tests' own object."""
    if type(entry) is not list or len(entry) != 2 or type(entry[0]) is not int or not 0 <= entry[0] < len(args):
        return
    original, changed = args[entry[0]], entry[1]
    if type(original) is list and type(changed) is list or type(original) is bytearray and type(changed) is bytearray:
        original[:] = changed
    elif type(original) in (dict, set) and type(changed) is type(original):
        original.clear()
        original.update(changed)


def _exception(reply: list) -> BaseException:
    """The program's exception as the nearest builtin exception (so tests can expect ValueError)."""
    types, text = (reply + [[], ""])[1:3]
    text = _text(text)
    message = text.split(": ", 1)[1] if ": " in text else ""
    for name in types if type(types) is list else []:
        klass = getattr(builtins, name, None) if type(name) is str else None
        if isinstance(klass, type) and issubclass(klass, Exception):
            try:
                return klass(message) if message else klass()
            except Exception:  # noqa: BLE001 - exceptions with several required arguments
                break
    return ProgramError(text or "exception in the program")


def _code(source: str, filename: str, marshalled: str | None) -> types.CodeType:
    """The code of a test or prelude: unmarshalled when the caller sent it compiled (it comes
    from the trusted caller, through a descriptor only the judge reads), else compiled here."""
    if marshalled:
        return marshal.loads(binascii.a2b_base64(marshalled))
    return _compile(source, filename, "exec", dont_inherit=True, optimize=0)  # asserts kept, whatever -O says


def report(event: dict) -> None:
    """The verdict on the report pipe, which only this process holds."""
    flush_standard_streams()
    try:
        os.write(REPORT_FD, wire.dumps(event) + b"\n")
    except OSError:
        pass


def run_judge(request: dict, *, stop: type[BaseException]) -> tuple[dict, int]:
    """Run the tests against the program: the event to report and 0 (passed) or 1.

    request: ``tests`` (snippets run in order in one namespace), ``prelude`` (task code run
    first, e.g. HumanEval's prompt with its helpers), ``entry_point`` (when set, only that name
    is taken from the program; otherwise every name it defines that does not shadow a builtin),
    ``nonce`` (written with the final "passed" event). ``stop`` (the wall clock ran out) is
    never taken for a failing test: it ends the tests.
    """
    tests = list(request.get("tests", []))
    entry_point = request.get("entry_point") or None
    link = Link(wire.Channel(REPLIES_FD, CALLS_FD))
    precompiled = request.get("compiled") or {}
    if precompiled.get("magic") != importlib.util.MAGIC_NUMBER.hex():
        precompiled = {}  # compiled by another Python version: compile here
    compiled = [
        _code(test, f"<test {index}>", (precompiled.get("tests") or [None] * len(tests))[index])
        for index, test in enumerate(tests)
    ]
    namespace: dict = {"__name__": "__passband_tests__", "__builtins__": builtins}
    try:
        names = link.names([entry_point] if entry_point else None)
        if entry_point:
            prelude = request.get("prelude") or ""
            if prelude:
                _exec(_code(prelude, "<prelude>", precompiled.get("prelude")), namespace)
            namespace.pop(entry_point, None)
        for name, spec in names.items():
            if type(name) is not str or name in _BUILTIN_NAMES or name.startswith("__") or type(spec) is not list:
                continue
            if spec[0] == "module":
                try:
                    namespace[name] = importlib.import_module(str(spec[1]))
                except Exception:  # noqa: BLE001, S112 - a module only the program has: leave it out
                    continue
            else:
                namespace[name] = spec[1]
    except stop:
        raise
    except ProgramGone as gone:
        return gone.event, 1
    except BaseException as error:  # noqa: BLE001
        return {"event": "test_failed", "index": 0, "error": describe_error(error), "line": None, "source": ""}, 1
    for index, code in enumerate(compiled):
        try:
            _exec(code, namespace)
        except stop:
            raise
        except ProgramGone as gone:
            return gone.event, 1
        except BaseException as error:  # noqa: BLE001
            line, text = failing_line(error, f"<test {index}>", tests[index])
            event = {"event": "test_failed", "index": index, "error": describe_error(error), "line": line}
            return {**event, "source": text}, 1
    if link.gone is not None:  # a test swallowed the program's death: still no pass
        return link.gone, 1
    return {"event": "passed", "nonce": request.get("nonce")}, 0
