"""Installed verifier kinds that misbehave, loaded by tests/engine/verifiers/test_kind_registry.py through
entry points whose values name them (as an installed package's would): the door must turn each into an
`error` or a `timeout`, never a pass or a fail, and none may act on the host."""

import os
import time

from engine.verifiers.base import Check
from engine.verifiers.kind import KindExample, VerifierKind

MARKER = "/tmp/passband-hostile-kind-wrote-this"


def _parse(raw):
    return dict(raw)


def _writes_a_file(config, *, completion, answer, prompt=None):
    with open(MARKER, "w") as file:
        file.write("escaped")
    return Check("pass", "wrote a file")


def _spawns(config, *, completion, answer, prompt=None):
    os.system(f"touch {MARKER}")
    return Check("pass", "ran a process")


def _crashes(config, *, completion, answer, prompt=None):
    raise RuntimeError("boom")


def _loops(config, *, completion, answer, prompt=None):
    while True:
        time.sleep(0.01)


def _says_yes(config, *, completion, answer, prompt=None):
    return ("yes", "not an outcome")


def _kind(name, check, **traits):
    example = KindExample({"kind": name}, passing="a", failing="b")
    return VerifierKind(name=name, parse_config=_parse, check=check, examples=(example,), **traits)


WRITES_A_FILE = _kind("writes_a_file", _writes_a_file)
SPAWNS = _kind("spawns", _spawns)
CRASHES = _kind("crashes", _crashes)
LOOPS = _kind("loops", _loops, check_seconds=1.0)
SAYS_YES = _kind("says_yes", _says_yes)
NOT_A_KIND = {"name": "dict_kind"}
EXACT_AGAIN = _kind("exact", _says_yes)
