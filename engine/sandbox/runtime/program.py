"""The program's process: runs the model's code. Nothing here is trusted by anyone.

``serve_program`` (tests mode) runs the program as module ``solution`` and then answers the
judge's requests (call this function, read that attribute) over two pipes, sending every value
back by value (see wire.py). Whatever this process does, including replacing this module's
functions, it can only choose the values it sends; it never sees the tests, and the verdict is
decided in the judge. ``run_script`` (stdio mode) runs the program as ``__main__``; its output
is compared by the caller.
"""

from __future__ import annotations

import builtins
import os
import sys
import traceback
import types

from . import wire

CALLS_FD, REPLIES_FD, REPORT_FD = 3, 4, 3
_exec = builtins.exec
_compile = builtins.compile
_os_exit = os._exit


def describe_error(error: BaseException) -> str:
    try:
        text = str(error)
    except BaseException:  # noqa: BLE001 - the program may have broken anything
        text = ""
    name = type(error).__name__
    return f"{name}: {text[:300]}" if text else name


def failing_line(error: BaseException, filename: str, source: str) -> tuple[int | None, str]:
    """The line of ``source`` (compiled as ``filename``) where ``error`` surfaced, if any."""
    line_number = None
    try:
        trace = error.__traceback__
        while trace is not None:
            if trace.tb_frame.f_code.co_filename == filename:
                line_number = trace.tb_lineno
            trace = trace.tb_next
    except BaseException:  # noqa: BLE001
        return None, ""
    if line_number is None:
        return None, ""
    lines = source.splitlines()
    text = lines[line_number - 1].strip() if 0 < line_number <= len(lines) else ""
    return line_number, text[:200]


def flush_standard_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # noqa: BLE001
            pass


class _Objects:
    """Objects of the program that the judge holds handles to, by id."""

    def __init__(self) -> None:
        self.by_id: dict[int, object] = {}

    def handle_for(self, value: object) -> object:
        tolist = getattr(type(value), "tolist", None)
        if tolist is not None and type(value).__module__ == "numpy":
            return wire.encode(tolist(value), self.handle_for)  # numpy scalars and arrays: plain values
        key = len(self.by_id) + 1
        self.by_id[key] = value
        return {"h": key, "n": type(value).__name__[:80]}

    def resolve(self, key: int, _type_name: str) -> object:
        if key not in self.by_id:
            raise wire.ProtocolError(f"unknown handle {key}")
        return self.by_id[key]


def _error_reply(error: BaseException, program: str, kind: str = "raise") -> list:
    line, text = failing_line(error, "solution.py", program)
    names = []
    try:
        names = [klass.__name__ for klass in type(error).__mro__][:20]
    except BaseException:  # noqa: BLE001
        pass
    return [kind, names, describe_error(error), line, text]


def serve_program(program: str) -> None:
    """Run the program, then answer the judge's requests until it closes its end. Never returns.

    Messages are JSON arrays (see wire.py for the values inside). Requests: ``["names", [name,
    ...] | null]``, ``["call", target, args, kwargs]``, ``["getattr", target, name]``,
    ``["iter", target]``, ``["next", target]``; a target is a name or a handle. Replies:
    ``["names", {name: ["value", v] | ["module", name]}]``, ``["value", v, [[index, v], ...]]``
    (with the arguments changed in place), ``["raise", types, text, line, source]``,
    ``["exit", ...]`` (the program raised SystemExit and the like, and ends), and, instead of the
    first reply, ``["syntax_error", line, text]`` or ``["program_error", types, text, line, source]``.
    """
    channel = wire.Channel(CALLS_FD, REPLIES_FD)
    objects = _Objects()
    try:
        code = _compile(program, "solution.py", "exec")
    except BaseException as error:  # noqa: BLE001
        _send(channel, ["syntax_error", getattr(error, "lineno", None), describe_error(error)])
        _os_exit(1)
    module = types.ModuleType("solution")
    module.__file__ = "solution.py"
    sys.modules["solution"] = module
    try:
        _exec(code, module.__dict__)
    except BaseException as error:  # noqa: BLE001
        _send(channel, _error_reply(error, program, "program_error"))
        flush_standard_streams()
        _os_exit(1)
    namespace = module.__dict__
    while True:
        try:
            request = wire.decode(channel.receive(), objects.resolve)
        except (wire.ChannelClosed, wire.ProtocolError):
            flush_standard_streams()
            _os_exit(0)
        reply = _answer(request, namespace, objects, program)
        try:
            payload = wire.dumps(reply)
        except (ValueError, TypeError, RecursionError) as error:
            payload = wire.dumps(["raise", ["TypeError"], f"TypeError: value cannot be sent: {error}", None, ""])
        _send_bytes(channel, payload)
        if reply[0] == "exit":
            flush_standard_streams()
            _os_exit(1)


_MUTABLE = (list, dict, set, bytearray)


def _answer(request: object, namespace: dict, objects: _Objects, program: str) -> list:
    if type(request) is not list or not request:
        return ["raise", ["TypeError"], "TypeError: malformed request", None, ""]
    operation = request[0]
    try:
        if operation == "names":
            wanted = request[1]
            names = [name for name in namespace if not name.startswith("__")] if wanted is None else wanted
            found = {}
            for name in names:
                if name in namespace:
                    value = namespace[name]
                    if isinstance(value, types.ModuleType):
                        found[name] = ["module", str(getattr(value, "__name__", name))]
                    else:
                        found[name] = ["value", value]
            return ["names", wire.encode(found, objects.handle_for)]
        target = request[1]
        if type(target) is str:
            target = namespace[target]
        if operation == "call":
            args, kwargs = request[2], request[3]
            # Arguments the function may change in place travel back when it did.
            mutable = [index for index, arg in enumerate(args) if type(arg) in _MUTABLE]
            before = {index: wire.dumps(wire.encode(args[index], objects.handle_for)) for index in mutable}
            result = wire.encode(target(*args, **kwargs), objects.handle_for)
            changed = []
            for index in mutable:
                after = wire.encode(args[index], objects.handle_for)
                if wire.dumps(after) != before[index]:
                    changed.append([index, after])
            return ["value", result, changed]
        if operation == "getattr":
            return ["value", wire.encode(getattr(target, str(request[2])), objects.handle_for), []]
        if operation == "iter":
            return ["value", wire.encode(iter(target), objects.handle_for), []]
        if operation == "next":
            return ["value", wire.encode(next(target), objects.handle_for), []]
        return ["raise", ["TypeError"], f"TypeError: unknown operation {operation!r}", None, ""]
    except Exception as error:  # noqa: BLE001
        return _error_reply(error, program)
    except BaseException as error:  # noqa: BLE001 - sys.exit and the like end the program
        return _error_reply(error, program, "exit")


def _send(channel: wire.Channel, message: list) -> None:
    try:
        _send_bytes(channel, wire.dumps(message))
    except (ValueError, TypeError):
        pass


def _send_bytes(channel: wire.Channel, payload: bytes) -> None:
    try:
        channel.send(payload)
    except wire.ChannelClosed:
        _os_exit(0)


def run_script(program: str) -> None:
    """Run the program as ``__main__`` (stdin/stdout programs); the exit code is the result."""
    try:
        code = _compile(program, "solution.py", "exec")
    except BaseException as error:  # noqa: BLE001
        _report({"event": "syntax_error", "line": getattr(error, "lineno", None), "error": describe_error(error)})
        _os_exit(1)
    module = types.ModuleType("__main__")
    module.__file__ = "solution.py"
    sys.modules["__main__"] = module
    exit_code = 0
    try:
        _exec(code, module.__dict__)
    except SystemExit as error:
        if error.code is None or error.code == 0:
            exit_code = 0
        elif isinstance(error.code, int):
            exit_code = error.code & 0xFF or 1
        else:
            print(error.code, file=sys.stderr)
            exit_code = 1
    except BaseException as error:  # noqa: BLE001
        line, text = failing_line(error, "solution.py", program)
        _report({"event": "program_error", "error": describe_error(error), "line": line, "source": text})
        try:
            # Start the traceback at the program's frame: the harness frame is noise.
            traceback.print_exception(type(error), error, error.__traceback__.tb_next if error.__traceback__ else None)
        except BaseException:  # noqa: BLE001
            pass
        exit_code = 1
    flush_standard_streams()
    _os_exit(exit_code)


def _report(event: dict) -> None:
    try:
        payload = wire.dumps(event) + b"\n"
        os.write(REPORT_FD, payload)
    except BaseException:  # noqa: BLE001
        pass
