"""The registry of LLM judges that ``llm_judge`` tasks may name.

A task never carries a URL or the name of an environment variable: it names a judge registered
here by the operator (``configure(judges=...)``; in the web app, the ``PASSBAND_JUDGES``
environment variable read in passband/settings.py). So a task author or an API caller cannot
point a worker at an internal address or make it read another secret.

Registry entry: ``{"base_url": "http://judge:8000/v1", "model": "Qwen/Qwen2.5-72B-Instruct",
"api_key_env": "JUDGE_API_KEY", "verdict_format": "text"}`` (``api_key_env`` optional: the variable holding
the key; ``verdict_format`` optional: how the reply is held to a verdict, one of ``VERDICT_FORMATS``:
``text`` asks in words only, ``grammar`` sends llama.cpp's ``grammar`` field, ``json_schema`` sends OpenAI's
``response_format``; see engine/verifiers/kinds/llm_judge.py).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Judge:
    name: str
    base_url: str
    model: str
    api_key_env: str = ""
    verdict_format: str = "text"


_lock = threading.Lock()
_judges: dict[str, Judge] = {}
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
VERDICT_FORMATS = ("text", "grammar", "json_schema")
_FIELDS = ("base_url", "model", "api_key_env", "verdict_format")


def _judge(name: str, entry: Any) -> Judge:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(f"judge name {name!r}: use letters, digits, '_', '.', '-' (at most 64)")
    if not isinstance(entry, Mapping):
        raise ValueError(f"judge {name}: must be an object with base_url and model")
    unknown = sorted(set(entry) - set(_FIELDS))
    if unknown:
        raise ValueError(f"judge {name}: unknown field {unknown[0]!r} (known: {', '.join(_FIELDS)})")
    base_url, model, key = entry.get("base_url"), entry.get("model"), entry.get("api_key_env", "")
    verdict_format = entry.get("verdict_format", "text")
    if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
        raise ValueError(f"judge {name}: base_url must be an http(s) URL such as http://judge:8000/v1")
    if not isinstance(model, str) or not model.strip():
        raise ValueError(f"judge {name}: model must be a non-empty string")
    if not isinstance(key, str) or (key and not _VARIABLE.fullmatch(key)):
        raise ValueError(f"judge {name}: api_key_env must be an environment variable name")
    if verdict_format not in VERDICT_FORMATS:
        raise ValueError(f"judge {name}: verdict_format must be one of {', '.join(VERDICT_FORMATS)}")
    return Judge(name=name, base_url=base_url.rstrip("/"), model=model, api_key_env=key, verdict_format=verdict_format)


def parse_judges(text: str) -> dict[str, dict[str, str]]:
    """The registry from its JSON text (``PASSBAND_JUDGES``); empty text means no judges.

    Raises ValueError saying which judge and field is wrong."""
    if not text or not text.strip():
        return {}
    try:
        raw = json.loads(text)
    except ValueError as error:
        raise ValueError(f"PASSBAND_JUDGES is not JSON: {error}") from None
    if not isinstance(raw, Mapping):
        raise ValueError('PASSBAND_JUDGES must be a JSON object {"name": {"base_url": ..., "model": ...}}')
    return {name: dict(entry) for name, entry in raw.items() if _judge(name, entry)}


def set_judges(judges: Mapping[str, Any]) -> None:
    """Replace the registry. Raises ValueError for a bad entry (and then changes nothing)."""
    parsed = {name: _judge(name, entry) for name, entry in judges.items()}
    with _lock:
        _judges.clear()
        _judges.update(parsed)


def get_judge(name: str) -> Judge | None:
    with _lock:
        return _judges.get(name)


def judge_names() -> list[str]:
    with _lock:
        return sorted(_judges)
