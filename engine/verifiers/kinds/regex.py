"""``regex``: the completion matches a regular expression written by the task author.

Config::

    {"kind": "regex",
     "pattern": "^(?:B|b)\\b",      # required; Python `re` syntax, compiled at import time
     "mode": "fullmatch",            # "fullmatch" (default) | "match" (anchored at start) | "search"
     "ignore_case": false, "multiline": false, "dotall": false,
     "strip": true,                  # strip surrounding whitespace of the completion first
     "max_chars": 100000}            # longer completions fail without running the regex

Python's ``re`` backtracks, so a pattern with nested quantifiers can take exponential time; the
length cap bounds the input, the author is responsible for a sane pattern (the audit runs it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from engine.verifiers.base import (
    Check,
    ConfigReader,
    VerifierConfigError,
    failed,
    passed,
    shorten,
)
from engine.verifiers.text import completion_text

KIND = "regex"
MODES = ("fullmatch", "match", "search")


@dataclass(frozen=True)
class RegexConfig:
    pattern: re.Pattern[str]
    mode: str
    strip: bool
    max_chars: int


def parse_config(raw: dict[str, Any]) -> RegexConfig:
    reader = ConfigReader(raw, kind=KIND)
    source = reader.string("pattern", non_empty=True)
    flags = 0
    if reader.boolean("ignore_case", False):
        flags |= re.IGNORECASE
    if reader.boolean("multiline", False):
        flags |= re.MULTILINE
    if reader.boolean("dotall", False):
        flags |= re.DOTALL
    try:
        pattern = re.compile(source, flags)
    except re.error as error:
        raise VerifierConfigError("pattern", f"is not a valid regular expression: {error}") from None
    config = RegexConfig(
        pattern=pattern,
        mode=reader.string("mode", "fullmatch", choices=MODES),
        strip=reader.boolean("strip", True),
        max_chars=reader.integer("max_chars", 100_000, minimum=1),
    )
    reader.finish()
    return config


def check(config: RegexConfig, *, completion: Any, answer: str | None = None, prompt: Any = None) -> Check:
    text = completion_text(completion)
    if config.strip:
        text = text.strip()
    if len(text) > config.max_chars:
        return failed(f"completion has {len(text)} characters, more than max_chars={config.max_chars}")
    match = getattr(config.pattern, config.mode)(text)
    if match is None:
        return failed(f"no {config.mode} of /{shorten(config.pattern.pattern, 60)}/ in {shorten(text, 60)!r}")
    return passed(f"{config.mode} {shorten(match.group(0), 80)!r}")
