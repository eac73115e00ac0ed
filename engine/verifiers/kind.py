"""The interface every verifier kind implements, built-in or installed: one ``VerifierKind`` object
carrying its config parser, its check, its audit hooks and its traits.

Standard library only, and importing nothing else of Passband but ``base``: a Harbor task folder copies
this file with the ``code`` kind (engine/integrations/harbor_code.py). Registration and discovery live in
engine/verifiers/registry.py; how to write a kind is in docs/verifiers.md ("Adding a verifier kind").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from engine.verifiers.base import Check

NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_]{0,39}$")

# The gameability batteries a kind can ask for (engine/verifiers/gameability.py builds each): "text" for
# kinds that read an answer out of prose, "text_in_reference_format" for those whose reference answers are
# written in a reply format of their own, "answer_tag" for scorers that read the last <answer> tag, "code"
# and "repository" for programs and patches, "empty" for the empty completion only, "none" for no battery
# at all (a paid judge); an environment's own fixtures run for every kind.
GAMEABILITY_BATTERIES = ("text", "text_in_reference_format", "answer_tag", "code", "repository", "empty", "none")


@dataclass(frozen=True)
class OutsideSource:
    """Tasks of this kind come from another framework: ``field`` is the config field naming the source (a
    generator, a taskset); ``package`` the distribution providing it ("": the source is itself a
    distribution's name). The environment page lists such tasks by source, with the installed version."""

    field: str
    package: str = ""


@dataclass(frozen=True)
class HarborTask:
    """What a kind's Harbor export gets for one task version: its key, prompt text and reference answer, its
    verifier config as stored and as parsed, and a reader of stored snapshots (digest -> archive bytes)."""

    key: str
    prompt: str
    answer: str
    raw_config: Mapping[str, Any]
    config: Any
    read_snapshot: Callable[[str], bytes]


@dataclass(frozen=True)
class KindExports:
    """How tasks of a kind leave Passband. Every exported row carries the verifier config, and a trainer
    scores it with ``engine.verifiers.verify``: ``package`` is the distribution the trainer installs next to
    Passband for that ("" for Passband's own kinds). ``harbor``, when set, writes one Harbor task folder
    ``{relative path: bytes}`` that carries its verifier's code; a kind without it is left out of Harbor
    exports. A kind that declares no KindExports at all is refused by every export."""

    package: str = ""
    harbor: Callable[[HarborTask], dict[str, bytes]] | None = None


@dataclass(frozen=True)
class KindExample:
    """A self-contained task of the kind for the contract test (tests/engine/verifiers/test_kind_contract.py):
    its verifier config, reference answer and prompt, a completion that must pass and one that must fail."""

    verifier: Mapping[str, Any]
    passing: Any
    failing: Any
    answer: str | None = None
    prompt: str | list[Any] | None = None


def _answer_itself(config: Any, answer: str | None) -> Any:
    return answer


def _no_completions(config: Any, answer: str | None) -> list[tuple[str, Any]]:
    return []


@dataclass(frozen=True, eq=False)  # compared and hashed by identity: one object per registered kind
class VerifierKind:
    """One verifier kind.

    name: what a task's ``verifier.kind`` says (lowercase letters, digits, underscores).
    parse_config(raw) -> config: validates ``{"kind": name, ...}`` at import time; raises
        VerifierConfigError naming the field. The parsed config is what ``check`` gets.
    check(config, *, completion, answer, prompt) -> Check: pass/fail/error/timeout and a short detail.
    check_many(config, *, completions) -> [Check]: several completions of one task graded together, in order
        (repository tasks: as few sandbox runs as fit); None: ``check`` one by one.
    reference_completion(config, answer): the reference answer as a model would write it, for the audit.
    audit_failing_completions(config, answer): ``[(label, completion)]`` that must fail in the audit.
    audit_task(config, answer): replaces the standard audit with the kind's own problems (None: standard).
    audit_shows_detail: whether audit problems may quote the verdict's detail (False for a judge's words).
    batchable: scoring takes well under a few milliseconds in process, so campaign rounds batch tasks.
    gameability: one of GAMEABILITY_BATTERIES.
    page_fragment: a template the task page includes below the verifier config ("": none); it gets
        ``verifier`` (the config) and ``verifier_page`` (what ``page_context`` returns).
    page_context(raw_config) -> dict: the data its fragment shows; a ``snapshot`` digest in it makes the page
        list that snapshot's files.
    outside_source: where tasks of this kind come from when another framework makes them.
    exports: how tasks of this kind are exported (None: they are not).
    examples: self-contained tasks for the contract test; ``examples_unavailable`` says why there are none.
    check_seconds: how long an installed kind's check may take (it runs in a helper process).
    version: the kind's version, shown on quality cards.
    """

    name: str
    parse_config: Callable[[dict[str, Any]], Any]
    check: Callable[..., Check]
    check_many: Callable[..., list[Check]] | None = None
    reference_completion: Callable[[Any, Any], Any] = _answer_itself
    audit_failing_completions: Callable[[Any, str | None], list[tuple[str, Any]]] = _no_completions
    audit_task: Callable[[Any, str | None], list[str]] | None = None
    audit_shows_detail: bool = True
    batchable: bool = False
    gameability: str = "empty"
    page_fragment: str = ""
    page_context: Callable[[Mapping[str, Any]], dict[str, Any]] | None = None
    outside_source: OutsideSource | None = None
    exports: KindExports | None = None
    examples: tuple[KindExample, ...] = ()
    examples_unavailable: str = ""
    check_seconds: float = 10.0
    version: str = "1"


def kind_problems(kind: Any) -> list[str]:
    """What is wrong with a would-be kind (an object from an entry point or a module), as sentences that say
    what to fix; [] when it is a well-formed VerifierKind."""
    if not isinstance(kind, VerifierKind):
        return [f"is a {type(kind).__name__}, not an engine.verifiers.kind.VerifierKind"]
    problems = []
    if not isinstance(kind.name, str) or not NAME_PATTERN.match(kind.name):
        problems.append(f"name {kind.name!r} must be lowercase letters, digits and underscores (at most 40)")
    for hook in ("parse_config", "check", "reference_completion", "audit_failing_completions"):
        if not callable(getattr(kind, hook)):
            problems.append(f"{hook} must be callable")
    for hook in ("audit_task", "page_context", "check_many"):
        if getattr(kind, hook) is not None and not callable(getattr(kind, hook)):
            problems.append(f"{hook} must be callable or None")
    if kind.gameability not in GAMEABILITY_BATTERIES:
        problems.append(f"gameability {kind.gameability!r} must be one of {', '.join(GAMEABILITY_BATTERIES)}")
    if not isinstance(kind.batchable, bool) or not isinstance(kind.audit_shows_detail, bool):
        problems.append("batchable and audit_shows_detail must be true or false")
    if not isinstance(kind.page_fragment, str) or (kind.page_fragment and not kind.page_fragment.endswith(".html")):
        problems.append(f"page_fragment {kind.page_fragment!r} must be a template name ending in .html, or empty")
    if kind.outside_source is not None and not isinstance(kind.outside_source, OutsideSource):
        problems.append("outside_source must be an OutsideSource or None")
    if kind.exports is not None and not isinstance(kind.exports, KindExports):
        problems.append("exports must be a KindExports or None")
    if kind.exports is not None and kind.exports.harbor is not None and not callable(kind.exports.harbor):
        problems.append("exports.harbor must be callable or None")
    if not all(isinstance(example, KindExample) for example in kind.examples):
        problems.append("examples must be KindExample objects")
    elif not kind.examples and not kind.examples_unavailable:
        problems.append("give at least one KindExample (or say in examples_unavailable why there can be none)")
    for index, example in enumerate(kind.examples):
        if isinstance(example, KindExample) and dict(example.verifier).get("kind") != kind.name:
            problems.append(f"examples[{index}].verifier.kind must be {kind.name!r}")
    seconds = kind.check_seconds
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 < seconds <= 600:
        problems.append(f"check_seconds must be a number of seconds in (0, 600], got {seconds!r}")
    if not isinstance(kind.version, str) or not kind.version:
        problems.append("version must be a non-empty string")
    return problems
