"""The task format: validate one decoded task object into a draft, or name what is wrong.

Pure functions with no database access. `validate_task_object` checks one task (a JSONL line, a
CSV row, the editor's form) and returns a draft or problems that name the file, line and field;
engine.task_files reads whole files with it. A file with any problem imports nothing.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from engine import input_rules, verifiers
from engine.episodes import plugins
from engine.repo_tasks.world import TOOL_NAMES as REPOSITORY_TOOL_NAMES

# A key is segments joined by "/", each starting with a letter or digit: no empty, "." or ".."
# segments, so a key can never be normalised into another task's URL.
KEY_SEGMENT = r"[A-Za-z0-9][A-Za-z0-9._:-]*"
KEY_PATTERN = re.compile(rf"^(?=.{{1,200}}$){KEY_SEGMENT}(?:/{KEY_SEGMENT})*$")
KEY_RULE = (
    "must be 1-200 characters: segments of letters, digits and . _ : - joined by /, "
    "each starting with a letter or digit"
)
ROLES = {"system", "user", "assistant", "tool"}
FIELDS = {"key", "prompt", "answer", "verifier", "domain", "metadata", "authoring_cost_usd", "tools", "difficulty"}
# The author's declared difficulty, word or number (higher: harder); only its order within an
# environment is used (docs/prediction.md, "Side information").
DIFFICULTY_WORDS = {"easy": 1.0, "medium": 2.0, "hard": 3.0}
REQUIRED = ("prompt",)


@dataclass(frozen=True)
class LineProblem:
    """One thing wrong with one line of a task file."""

    filename: str
    line: int  # 1-based; 0 for the file as a whole
    field: str  # "" when the problem is the whole line
    reason: str
    unit: str = "line"  # "row" in tables (Parquet, Arrow), whose rows are numbered from 1

    def __str__(self) -> str:
        where = f"{self.filename}, {self.unit} {self.line}" if self.line else self.filename
        if self.field:
            where += f", field '{self.field}'"
        return f"{where}: {self.reason}"


@dataclass
class TaskDraft:
    """A validated task, ready to be written as a new task or a new version."""

    line: int
    key: str | None
    prompt: list[dict[str, str]]
    answer: str
    verifier: dict[str, Any]
    domain: str
    metadata: dict[str, Any] = field(default_factory=dict)
    tools: list[dict[str, Any]] = field(default_factory=list)
    authoring_cost_usd: Decimal | None = None  # None: the author did not say
    difficulty: float | None = None

    @property
    def content_hash(self) -> str:
        return content_hash(prompt=self.prompt, answer=self.answer, verifier=self.verifier, tools=self.tools)


def content_hash(*, prompt: list[dict], answer: str, verifier: dict, tools: list) -> str:
    """sha256 of what the model sees and how it is graded, in canonical JSON."""
    canonical = json.dumps(
        {"prompt": prompt, "answer": answer, "verifier": verifier, "tools": tools},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def normalise_prompt(value: Any) -> list[dict[str, str]]:
    """A prompt is a non-empty string (one user message) or a list of chat messages."""
    if isinstance(value, str):
        if not value.strip():
            raise ValueError("must not be empty")
        return [{"role": "user", "content": value}]
    if isinstance(value, list) and value:
        messages = []
        for position, message in enumerate(value):
            if not isinstance(message, dict):
                raise ValueError(f"message {position} must be an object with 'role' and 'content'")
            role, content = message.get("role"), message.get("content")
            if role not in ROLES:
                raise ValueError(f"message {position} has role {role!r}; expected one of {sorted(ROLES)}")
            if not isinstance(content, str):
                raise ValueError(f"message {position} needs 'content' as a string")
            messages.append({"role": role, "content": content})
        if not any(message["role"] == "user" for message in messages):
            raise ValueError("needs at least one user message")
        return messages
    raise ValueError("must be a non-empty string or a list of {role, content} messages")


def validate_task_object(
    obj: Any, *, filename: str, line: int, default_verifier: dict, default_domain: str
) -> tuple[TaskDraft | None, list[LineProblem]]:
    """Check one decoded task object. Returns a draft, or None and the problems found."""
    problems: list[LineProblem] = []

    def problem(field_name: str, reason: str) -> None:
        problems.append(LineProblem(filename, line, field_name, reason))

    if not isinstance(obj, dict):
        problem("", f"expected a JSON object, got {type(obj).__name__}")
        return None, problems
    for unknown in sorted(set(obj) - FIELDS):
        problem(unknown, f"unknown field; expected some of {sorted(FIELDS)}")
    for required in REQUIRED:
        if required not in obj:
            problem(required, "missing required field")

    key = obj.get("key")
    if key is not None and (not isinstance(key, str) or not KEY_PATTERN.match(key)):
        problem("key", KEY_RULE)
    # The first break of the input rule (a NUL, a lone surrogate, nesting too deep) is reported, and
    # its field checked no further: a verifier nested too deep would exhaust the stack when checked.
    broken = input_rules.value_problem(obj)
    refused = {broken.field} if broken is not None else set()
    if broken is not None:
        problem(broken.field, broken.reason)

    prompt = _prompt(obj, problem)
    answer = _answer(obj, problem)
    verifier = {} if "verifier" in refused else _verifier(obj, default_verifier, problem)

    domain = obj.get("domain", default_domain)
    if not isinstance(domain, str) or not domain.strip() or len(domain) > 40:
        problem("domain", "must be a non-empty string of at most 40 characters")

    metadata = obj.get("metadata", {})
    if not isinstance(metadata, dict):
        problem("metadata", f"must be an object, got {type(metadata).__name__}")

    tools = obj.get("tools", [])
    if not isinstance(tools, list) or not all(isinstance(tool, dict) for tool in tools):
        problem("tools", "must be a list of tool (function schema) objects")
    elif tools and isinstance(verifier.get("environment"), str) and all(p.field != "verifier" for p in problems):
        _environment_tools(tools, verifier["environment"], problem)
    elif tools and verifier.get("kind") == "repo_tests":
        _repository_tools(tools, problem)

    if not problems and isinstance(verifier.get("environment"), str):
        _world_resets(verifier, problem)
    cost = _authoring_cost(obj, problem)
    difficulty = _difficulty(obj, problem)

    if problems:
        return None, problems
    draft = TaskDraft(
        line=line,
        key=key,
        prompt=prompt,
        answer=answer,
        verifier=verifier,
        domain=domain.strip(),
        metadata=metadata,
        tools=tools,
        authoring_cost_usd=None if cost is None else cost.quantize(Decimal("0.01")),
        difficulty=difficulty,
    )
    return draft, []


Problem = Callable[[str, str], None]  # problem(field, reason) records one problem of the object


def _prompt(obj: dict, problem: Problem) -> list[dict[str, str]]:
    if "prompt" not in obj:
        return []  # a problem already: the field is required
    try:
        return normalise_prompt(obj["prompt"])
    except ValueError as error:
        problem("prompt", str(error))
        return []


def _answer(obj: dict, problem: Problem) -> str:
    answer = obj.get("answer", "")
    if isinstance(answer, bool) or not isinstance(answer, (str, int, float)):
        problem("answer", f"must be a string, got {type(answer).__name__}")
        return ""
    return str(answer)


def _verifier(obj: dict, default_verifier: dict, problem: Problem) -> dict:
    verifier = obj.get("verifier", default_verifier)
    if not isinstance(verifier, dict) or not verifier:
        problem("verifier", 'must be an object like {"kind": "math"} (or set a default on the environment)')
        return {}
    try:
        verifiers.validate_config(verifier)
    except verifiers.VerifierConfigError as error:
        problem("verifier", str(error))
    return verifier


def _environment_tools(tools: list[dict], environment: str, problem: Problem) -> None:
    """A tool task's tools: valid OpenAI function schemas, each a tool its environment plug-in has."""
    try:
        offered = plugins.get(environment).tool_names
    except plugins.UnknownEnvironment:
        for message in plugins.tool_schema_problems(tools)[:3]:
            problem("tools", message)
        return  # the verifier's own check says so
    _tools_offered(
        tools,
        offered=offered,
        world=f"environment {environment}",
        fix=": copy their schemas from the environment's page or `manage.py environments`",
        problem=problem,
    )


def _world_resets(verifier: dict, problem: Problem) -> None:
    """A plug-in task's world resets from its seed (in the sandbox, as rollouts reset it): a world that
    cannot is refused here, naming the seed, rather than imported to fail every rollout."""
    seed = verifier.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        return  # the verifier's own check says so
    failure = world_reset_problem(environment=verifier["environment"], seed=seed)
    if failure:
        problem("verifier.seed", f"{failure}; fix the plug-in's reset or choose a seed it can reset from")


def world_reset_problem(*, environment: str, seed: int) -> str:
    """Why a plug-in world of (environment, seed) cannot reset in the sandbox ("" when it can, or when no
    such plug-in is installed: the verifier's check says so). Remembered per plug-in version and seed."""
    try:
        plugin = plugins.get(environment)
    except plugins.UnknownEnvironment:
        return ""
    return _reset_problem(environment, seed, plugin.distribution, plugin.version)


@functools.lru_cache(maxsize=4096)
def _reset_problem(environment: str, seed: int, distribution: str, version: str) -> str:
    from engine.episodes.world import SandboxedWorld, WorldResetError

    try:
        SandboxedWorld(environment=environment, seed=seed).reset()
    except WorldResetError as failure:
        return str(failure)
    return ""


def _repository_tools(tools: list[dict], problem: Problem) -> None:
    """A repository task's tools: valid function schemas, each one of the repository world's."""
    _tools_offered(tools, offered=REPOSITORY_TOOL_NAMES, world="the repository world", fix="", problem=problem)


def _tools_offered(tools: list[dict], *, offered: tuple[str, ...], world: str, fix: str, problem: Problem) -> None:
    for message in plugins.tool_schema_problems(tools)[:3]:
        problem("tools", message)
    for index, tool in enumerate(tools):
        name = (tool.get("function") or {}).get("name") if isinstance(tool.get("function"), dict) else None
        if isinstance(name, str) and name not in offered:
            problem(
                "tools", f"tool {index} ({name}) is not a tool of {world}, whose tools are {', '.join(offered)}{fix}"
            )


def _authoring_cost(obj: dict, problem: Problem) -> Decimal | None:
    """The task's authoring cost in dollars; None when the field is absent, null or empty (not given)."""
    cost_value = obj.get("authoring_cost_usd")
    if cost_value is None or (isinstance(cost_value, str) and not cost_value.strip()):
        return None
    if isinstance(cost_value, bool) or not isinstance(cost_value, (int, float, str)):
        problem("authoring_cost_usd", f"must be a number, got {type(cost_value).__name__}")
        return Decimal("0")
    try:
        cost = Decimal(str(cost_value))
        if not cost.is_finite() or cost < 0 or cost >= Decimal("1e8"):
            raise InvalidOperation
    except InvalidOperation:
        problem("authoring_cost_usd", f"must be a number of dollars between 0 and 99,999,999, got {cost_value!r}")
        return Decimal("0")
    return cost


def _difficulty(obj: dict, problem: Problem) -> float | None:
    try:
        return difficulty_value(obj.get("difficulty"))
    except ValueError as error:
        problem("difficulty", str(error))
        return None


_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")


def difficulty_value(value: Any) -> float | None:
    """A declared difficulty as a number: a word is its rank in DIFFICULTY_WORDS, a text holding one
    number is that number ("Level 3", as MATH labels its problems, is 3); None or "" declares none.
    Raises ValueError saying what is accepted."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    number: float | None = None
    if isinstance(value, str):
        word = value.strip().lower()
        if word in DIFFICULTY_WORDS:
            return DIFFICULTY_WORDS[word]
        numbers = _NUMBER.findall(word)
        number = float(numbers[0]) if len(numbers) == 1 else None
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    if number is not None and math.isfinite(number) and abs(number) < 1e9:
        return number
    raise ValueError(
        f"must be a number (higher is harder, e.g. a level 1-5, or a text with one number such as "
        f"'Level 3') or one of {', '.join(DIFFICULTY_WORDS)}; got {value!r}"
    )
