"""``regex``: the completion matches a regular expression written by the task author.

Config::

    {"kind": "regex",
     "pattern": "^(?:B|b)\\b",      # required; RE2 syntax (Python `re` without backreferences
                                    #  or lookaround), compiled at import time
     "mode": "fullmatch",            # "fullmatch" (default) | "match" (anchored at start) | "search"
     "ignore_case": false, "multiline": false, "dotall": false,
     "strip": true,                  # strip surrounding whitespace of the completion first
     "max_chars": 100000}            # longer completions fail without running the regex

Patterns run on RE2 (``engine/verifiers/author_regex.py``): matching takes linear time, so no
completion can make a pattern with nested quantifiers backtrack for minutes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.verifiers.author_regex import require_author_regex
from engine.verifiers.base import (
    Check,
    ConfigReader,
    failed,
    passed,
    shorten,
)
from engine.verifiers.kind import KindExample, KindExports, VerifierKind
from engine.verifiers.text import completion_text

KIND = "regex"
MODES = ("fullmatch", "match", "search")


@dataclass(frozen=True)
class RegexConfig:
    pattern: Any  # a compiled RE2 pattern
    source: str
    mode: str
    strip: bool
    max_chars: int


def parse_config(raw: dict[str, Any]) -> RegexConfig:
    reader = ConfigReader(raw, kind=KIND)
    source = reader.string("pattern", non_empty=True)
    flags = {
        "ignore_case": reader.boolean("ignore_case", False),
        "multiline": reader.boolean("multiline", False),
        "dotall": reader.boolean("dotall", False),
    }
    config = RegexConfig(
        pattern=require_author_regex("pattern", source, **flags),
        source=source,
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
        return failed(f"no {config.mode} of /{shorten(config.source, 60)}/ in {shorten(text, 60)!r}")
    return passed(f"{config.mode} {shorten(match.group(0), 80)!r}")


VERIFIER_KIND = VerifierKind(
    name=KIND,
    parse_config=parse_config,
    check=check,
    batchable=True,
    gameability="text",
    exports=KindExports(),
    examples=(KindExample({"kind": KIND, "pattern": "[Bb]"}, passing=" B ", failing="C", answer="B"),),
)
