"""Regular expressions written by task authors (regex verifiers, JSON Schema ``pattern``) run on
RE2 (PyPI ``google-re2``): its matching time is linear in the text, so no completion can make
a pattern backtrack for minutes. RE2 has no backreferences or lookaround; a pattern that uses
them is a config error, reported when the task is imported.
"""

from __future__ import annotations

import functools

import re2

from engine.verifiers.base import VerifierConfigError


@functools.lru_cache(maxsize=1024)
def compile_author_regex(source: str, *, ignore_case: bool = False, multiline: bool = False, dotall: bool = False):
    """A compiled RE2 pattern with Python-``re``-like ``search``/``match``/``fullmatch``.

    Raises ValueError (with RE2's reason) for a pattern RE2 does not accept."""
    options = re2.Options()
    options.log_errors = False
    options.case_sensitive = not ignore_case
    options.dot_nl = dotall
    try:
        return re2.compile(f"(?m){source}" if multiline else source, options)
    except re2.error as error:
        reason = error.args[0] if error.args else error
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise ValueError(str(reason)) from None


def require_author_regex(field: str, source: str, **flags: bool):
    """compile_author_regex, with failures as a VerifierConfigError naming ``field``."""
    try:
        return compile_author_regex(source, **flags)
    except ValueError as error:
        raise VerifierConfigError(
            field,
            f"is not a regular expression RE2 accepts ({error}); Passband runs author patterns on RE2 "
            "(linear time), which has no backreferences or lookaround",
        ) from None
