"""Values by value between the judge (tests) and the program (the model's code), and the frames
that carry them. Standard library only: the sandbox server loads this before it isolates itself.

The program's process is untrusted: whatever it sends is decoded here into fresh, genuine
builtin objects (exact types, never subclasses), so a comparison in the judge runs Python's own
``int.__eq__`` or ``list.__eq__``, never one the program wrote. A value the program cannot send
by value (a function, an instance of its own class, a generator) travels as a *handle*: the
judge may call it or read its attributes, but a handle equals only itself and has no truth value.

Encoding (JSON): None, bool, str, float and int within 2**62 as themselves; lists as arrays;
other types as one-key objects: {"I": hex} big int, {"t": [...]} tuple, {"d": [[k, v], ...]}
dict, {"s": [...]} set, {"f": [...]} frozenset, {"b": hex} bytes, {"y": hex} bytearray,
{"c": [re, im]} complex, {"h": id, "n": type name} handle.
"""

from __future__ import annotations

import functools
import json
import os
import struct
from collections.abc import Callable
from typing import Any

# A value crossing between program and judge: 16 MB decodes in well under the second of grace past
# the wall clock, so a program cannot hold the judge in C (where its alarm cannot interrupt) for long.
MAX_FRAME_BYTES = 16 << 20
_SMALL_INT = 1 << 62
_HEADER = struct.Struct(">I")


class ProtocolError(Exception):
    """What came over the channel is not a well-formed message."""


class ChannelClosed(Exception):
    """The other side closed its end (it exited or was killed)."""


def encode(value: Any, handle_for: Callable[[Any], object]) -> object:
    """A JSON-ready form of ``value``; ``handle_for(value)`` gives the handle of anything else."""
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return value
    if kind is int:
        return value if -_SMALL_INT < value < _SMALL_INT else {"I": format(value, "x")}
    if kind is float:
        return value
    if kind is list:
        return [encode(item, handle_for) for item in value]
    if kind is tuple:
        return {"t": [encode(item, handle_for) for item in value]}
    if kind is dict:
        return {"d": [[encode(key, handle_for), encode(item, handle_for)] for key, item in value.items()]}
    if kind is set:
        return {"s": [encode(item, handle_for) for item in value]}
    if kind is frozenset:
        return {"f": [encode(item, handle_for) for item in value]}
    if kind is bytes:
        return {"b": value.hex()}
    if kind is bytearray:
        return {"y": value.hex()}
    if kind is complex:
        return {"c": [value.real, value.imag]}
    return handle_for(value)


def _tagged(pairs: list) -> object:
    if len(pairs) != 1:
        raise ProtocolError("a tagged value has exactly one key")
    tag, body = pairs[0]
    if tag == "t":
        return tuple(_list(body))
    if tag == "d":
        result = {}
        for pair in _list(body):
            if type(pair) is not list or len(pair) != 2:
                raise ProtocolError("a dict entry is a [key, value] pair")
            result[pair[0]] = pair[1]
        return result
    if tag == "s":
        return set(_list(body))
    if tag == "f":
        return frozenset(_list(body))
    if tag == "I":
        return int(_str(body), 16)
    if tag == "b":
        return bytes.fromhex(_str(body))
    if tag == "y":
        return bytearray.fromhex(_str(body))
    if tag == "c":
        real, imag = _list(body)
        if type(real) not in (int, float) or type(imag) not in (int, float):
            raise ProtocolError("a complex number is two numbers")
        return complex(real, imag)
    raise ProtocolError(f"unknown tag {tag!r}")


def _list(body: object) -> list:
    if type(body) is not list:
        raise ProtocolError("expected a list")
    return body


def _str(body: object) -> str:
    if type(body) is not str:
        raise ProtocolError("expected a string")
    return body


def decode(data: bytes, resolve_handle) -> object:
    """Decode a message; ``resolve_handle(id, type_name)`` makes the receiver's object for a handle.

    Raises ProtocolError for anything malformed, including nesting too deep to decode."""
    try:
        return _decoder(resolve_handle).decode(data.decode("utf-8"))
    except ProtocolError:
        raise
    except (ValueError, TypeError, RecursionError, MemoryError) as error:
        raise ProtocolError(f"malformed message: {type(error).__name__}") from None


@functools.lru_cache(maxsize=8)
def _decoder(resolve_handle) -> json.JSONDecoder:
    """One decoder per receiver (each side of a run has one): building it per message costs more
    than decoding a typical message."""

    def hook(pairs: list) -> object:
        if len(pairs) == 2 and {pairs[0][0], pairs[1][0]} == {"h", "n"}:
            found = dict(pairs)
            if type(found["h"]) is not int:
                raise ProtocolError("a handle id is an integer")
            return resolve_handle(found["h"], _str(found["n"]))
        return _tagged(pairs)

    return json.JSONDecoder(object_pairs_hook=hook)


_ENCODER = json.JSONEncoder(separators=(",", ":"))


def dumps(message: object) -> bytes:
    return _ENCODER.encode(message).encode()


class Channel:
    """Length-prefixed frames over a pair of pipe descriptors."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self.read_fd = read_fd
        self.write_fd = write_fd

    def send(self, payload: bytes) -> None:
        data = _HEADER.pack(len(payload)) + payload
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self.write_fd, view) :]
        except (BrokenPipeError, OSError) as error:
            raise ChannelClosed(str(error)) from None

    def receive(self) -> bytes:
        (size,) = _HEADER.unpack(self._exactly(_HEADER.size))
        if size > MAX_FRAME_BYTES:
            raise ProtocolError(f"message of {size} bytes is over the {MAX_FRAME_BYTES} byte limit")
        return self._exactly(size)

    def _exactly(self, size: int) -> bytes:
        chunks = []
        while size:
            try:
                chunk = os.read(self.read_fd, min(size, 1 << 20))
            except OSError as error:
                raise ChannelClosed(str(error)) from None
            if not chunk:
                raise ChannelClosed("end of file")
            chunks.append(chunk)
            size -= len(chunk)
        return b"".join(chunks)
