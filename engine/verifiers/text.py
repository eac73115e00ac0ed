"""Getting at the answer inside a completion: chat messages, \\boxed{}, code fences, JSON blocks."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any


def is_chat_message(value: Any) -> bool:
    return isinstance(value, Mapping) and "role" in value


def is_chat_messages(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(is_chat_message(item) for item in value)


def message_text(message: Mapping[str, Any]) -> str:
    """Text content of one chat message; content parts (``[{"type": "text", ...}]``) are joined."""
    content = message.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, Mapping) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "".join(parts)
    return str(content)


def completion_text(completion: Any) -> str:
    """The text a text-based verifier should look at.

    str: itself. A chat message dict: its content. A list of chat messages: the content of the
    last assistant message (the model's final turn). Anything else: its JSON text.
    """
    if completion is None:
        return ""
    if isinstance(completion, str):
        return completion
    if is_chat_message(completion):
        return message_text(completion)
    if is_chat_messages(completion):
        for message in reversed(completion):
            if message.get("role") == "assistant":
                return message_text(message)
        return message_text(completion[-1])
    try:
        return json.dumps(completion, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(completion)


def prompt_text(prompt: Any) -> str:
    """A task prompt (string or chat messages) as plain text, for judges and details."""
    if prompt is None:
        return ""
    if isinstance(prompt, str):
        return prompt
    if is_chat_messages(prompt):
        return "\n\n".join(f"[{message.get('role')}]\n{message_text(message)}" for message in prompt)
    return completion_text(prompt)


_BOX_OPENER = re.compile(r"\\(?:boxed|fbox)\s*\{")


def boxed_spans(text: str) -> list[tuple[int, int]]:
    """Where the contents of every ``\\boxed{...}`` / ``\\fbox{...}`` lie, (start, end) in order, with
    nested braces balanced.

    One pass over the text (a stack of open boxes), so ``\\boxed{`` repeated thousands of times
    without a closing brace costs linear time, not quadratic."""
    openers = {match.end(): match.start() for match in _BOX_OPENER.finditer(text)}
    found: list[tuple[int, int]] = []  # (start of the contents, end of the contents)
    open_boxes: list[tuple[int, int]] = []  # (depth at which the box's brace opened, index after it)
    depth = 0
    for index, character in enumerate(text):
        if character == "{":
            depth += 1
            if index + 1 in openers:
                open_boxes.append((depth, index + 1))
        elif character == "}" and depth:
            if open_boxes and open_boxes[-1][0] == depth:
                _, start = open_boxes.pop()
                found.append((start, index))
            depth -= 1
    found.sort()
    return found


def boxed_contents(text: str) -> list[str]:
    """Contents of every ``\\boxed{...}`` / ``\\fbox{...}`` in order (see boxed_spans)."""
    return [text[start:end] for start, end in boxed_spans(text)]


def tag_spans(text: str, opener: str, closer: str) -> list[tuple[int, int]]:
    """Where the contents of ``<tag>...</tag>`` spans lie, (start, end), each from an opener to the next
    closer (openers in between are content), case-insensitive. Linear: one scan of the tag positions."""
    pattern = re.compile(f"({re.escape(opener)})|{re.escape(closer)}", re.IGNORECASE)
    results = []
    start = None
    for match in pattern.finditer(text):
        if match.group(1) is not None:
            if start is None:
                start = match.end()
        elif start is not None:
            results.append((start, match.start()))
            start = None
    return results


def tag_contents(text: str, opener: str, closer: str) -> list[str]:
    """Contents of ``<tag>...</tag>`` spans (see tag_spans)."""
    return [text[start:end] for start, end in tag_spans(text, opener, closer)]


def answer_tag_contents(text: str) -> list[str]:
    return tag_contents(text, "<answer>", "</answer>")


def last_nonempty_line(text: str) -> str:
    for line in reversed(text.splitlines()):
        if line.strip():
            return line
    return ""


_FENCE = re.compile(r"^[ \t]*```[ \t]*([\w+.-]*)[^\n]*\n(.*?)(?:^[ \t]*```[ \t]*$|\Z)", re.DOTALL | re.MULTILINE)
_PYTHON_FENCE_LANGUAGES = {"", "python", "py", "python3", "py3"}


def fenced_blocks(text: str, languages: set[str] | None = None) -> list[str]:
    """Bodies of ```lang fenced blocks (an unterminated last fence runs to the end of the text)."""
    blocks = []
    for match in _FENCE.finditer(text):
        language = match.group(1).lower()
        if languages is None or language in languages:
            blocks.append(match.group(2))
    return blocks


def extract_python_code(text: str, *, entry_point: str | None = None) -> str:
    """The program inside a completion.

    If the completion has ```python (or bare ```) fences, take the last block that defines
    ``entry_point`` when one is given, else the last block; models often add a usage example
    after the solution, so the defining block wins over the last one. Without fences the whole
    completion is the program.
    """
    blocks = fenced_blocks(text, _PYTHON_FENCE_LANGUAGES)
    if not blocks:
        return text
    if entry_point:
        defining = [block for block in blocks if defines_function(block, entry_point)]
        if defining:
            return defining[-1]
    return blocks[-1]


def defines_function(code: str, name: str) -> bool:
    """Whether ``code`` has a top-level ``def name(`` (or ``async def``)."""
    return re.search(rf"^(?:async[ \t]+)?def[ \t]+{re.escape(name)}[ \t]*\(", code, re.MULTILINE) is not None


def parse_json_value(text: str, *, extract: bool) -> tuple[bool, Any]:
    """Parse a completion as JSON.

    With ``extract``, when the whole text is not JSON, try the last ```json block, then the
    outermost {...} or [...] span. Returns (ok, value).
    """
    stripped = text.strip()
    try:
        return True, json.loads(stripped)
    except ValueError:
        pass
    if not extract:
        return False, None
    candidates = list(reversed(fenced_blocks(text, {"json", "", "jsonc"})))
    for opener, closer in (("{", "}"), ("[", "]")):
        start, end = text.find(opener), text.rfind(closer)
        if 0 <= start < end:
            candidates.append(text[start : end + 1])
    for candidate in candidates:
        try:
            return True, json.loads(candidate.strip())
        except ValueError:
            continue
    return False, None
