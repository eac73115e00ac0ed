"""``json``: the completion is valid JSON and satisfies a schema and/or expected values.

Config (all optional; with none, valid JSON is enough)::

    {"kind": "json",
     "schema": {"type": "object", "required": ["name"]},   # JSON Schema (Draft 2020-12 unless
                                                           #  "$schema" says otherwise)
     "expected": {"/name": "Ada", "/tags/0": "math"},      # JSON Pointer (RFC 6901) -> value
     "equals_answer": false,      # the whole value must equal the task's answer (parsed as JSON)
     "extract": true}             # if the whole completion is not JSON, use the last ```json
                                  #  block, else the outermost {...} / [...] span

A completion that is already a dict or list (not chat messages) is taken as the JSON value.
Numbers compare by value (1 == 1.0); true is not 1.

Schema regexes (``pattern``, ``patternProperties``) run on RE2 (linear time; no backreferences
or lookaround, checked at import), never on Python's backtracking ``re``; a schema that combines
``patternProperties`` with ``unevaluatedProperties`` is refused, since jsonschema would match
those patterns with ``re``.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any

import jsonschema
from jsonschema.exceptions import ValidationError

from engine.verifiers.author_regex import compile_author_regex, require_author_regex
from engine.verifiers.base import (
    Check,
    ConfigReader,
    VerifierConfigError,
    errored,
    failed,
    passed,
    shorten,
)
from engine.verifiers.kind import KindExample, KindExports, VerifierKind
from engine.verifiers.text import (
    completion_text,
    is_chat_message,
    is_chat_messages,
    parse_json_value,
)

KIND = "json"


@dataclass(frozen=True)
class JsonConfig:
    schema: dict[str, Any] | None
    expected: dict[str, Any]
    equals_answer: bool
    extract: bool


def parse_config(raw: dict[str, Any]) -> JsonConfig:
    reader = ConfigReader(raw, kind=KIND)
    schema = reader.mapping("schema", None) if reader.has("schema") else None
    if schema is not None:
        validator_class = jsonschema.validators.validator_for(schema)
        try:
            validator_class.check_schema(schema)
        except jsonschema.SchemaError as error:
            raise VerifierConfigError("schema", f"is not a valid JSON Schema: {error.message}") from None
        _check_schema_regexes(schema)
    expected = reader.mapping("expected", {})
    for pointer in expected:
        if pointer and not pointer.startswith("/"):
            raise VerifierConfigError("expected", f"keys are JSON Pointers starting with '/', got {pointer!r}")
    config = JsonConfig(
        schema=schema,
        expected=expected,
        equals_answer=reader.boolean("equals_answer", False),
        extract=reader.boolean("extract", True),
    )
    reader.finish()
    return config


_MISSING = object()


def _check_schema_regexes(schema: Any) -> None:
    """Every pattern in the schema compiles on RE2; no patternProperties with unevaluatedProperties."""
    keywords: set[str] = set()

    def walk(node: Any, where: str) -> None:
        if isinstance(node, list):
            for index, item in enumerate(node):
                walk(item, f"{where}/{index}")
            return
        if not isinstance(node, dict):
            return
        keywords.update(key for key in node if isinstance(key, str))
        if isinstance(node.get("pattern"), str):
            require_author_regex(f"schema{where}/pattern", node["pattern"])
        if isinstance(node.get("patternProperties"), dict):
            for pattern in node["patternProperties"]:
                require_author_regex(f"schema{where}/patternProperties", pattern)
        for key, value in node.items():
            walk(value, f"{where}/{key}")

    walk(schema, "")
    if "unevaluatedProperties" in keywords and "patternProperties" in keywords:
        raise VerifierConfigError("schema", "patternProperties with unevaluatedProperties is not supported")


def _pattern(validator: Any, pattern: str, instance: Any, schema: dict) -> Any:
    if validator.is_type(instance, "string") and not compile_author_regex(pattern).search(instance):
        yield ValidationError(f"{shorten(instance, 60)!r} does not match {pattern!r}")


def _pattern_properties(validator: Any, pattern_properties: dict, instance: Any, schema: dict) -> Any:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in pattern_properties.items():
        compiled = compile_author_regex(pattern)
        for key, value in instance.items():
            if compiled.search(key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(validator: Any, additional: Any, instance: Any, schema: dict) -> Any:
    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    patterns = [compile_author_regex(pattern) for pattern in schema.get("patternProperties", {})]
    extras = [key for key in instance if key not in properties and not any(pattern.search(key) for pattern in patterns)]
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif additional is False and extras:
        listed = ", ".join(repr(extra) for extra in sorted(extras, key=str)[:5])
        yield ValidationError(f"Additional properties are not allowed ({listed} unexpected)")


@functools.lru_cache(maxsize=64)
def _re2_validator_class(base: Any) -> Any:
    """The schema's validator class with its regex keywords running on RE2."""
    overrides = {"pattern": _pattern, "patternProperties": _pattern_properties}
    if "additionalProperties" in base.VALIDATORS:
        overrides["additionalProperties"] = _additional_properties
    return jsonschema.validators.extend(
        base, {key: value for key, value in overrides.items() if key in base.VALIDATORS}
    )


def resolve_pointer(document: Any, pointer: str) -> Any:
    """The value at a JSON Pointer, or _MISSING."""
    if pointer == "":
        return document
    current = document
    for token in pointer[1:].split("/"):
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(current, dict):
            if token not in current:
                return _MISSING
            current = current[token]
        elif isinstance(current, list):
            if not token.isdigit() or int(token) >= len(current):
                return _MISSING
            current = current[int(token)]
        else:
            return _MISSING
    return current


def json_equal(left: Any, right: Any) -> bool:
    """JSON equality: 1 == 1.0, but True != 1 and key order does not matter."""
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left == right
    if isinstance(left, (int, float)) and isinstance(right, (int, float)):
        return left == right
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(json_equal(left[key], right[key]) for key in left)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(json_equal(a, b) for a, b in zip(left, right, strict=True))
    return type(left) is type(right) and left == right


def _completion_value(completion: Any, extract: bool) -> tuple[bool, Any]:
    if isinstance(completion, (dict, list)) and not is_chat_message(completion) and not is_chat_messages(completion):
        return True, completion
    return parse_json_value(completion_text(completion), extract=extract)


def check(config: JsonConfig, *, completion: Any, answer: str | None, prompt: Any = None) -> Check:
    ok, value = _completion_value(completion, config.extract)
    if not ok:
        return failed(f"not valid JSON: {shorten(completion_text(completion), 60)!r}")
    if config.schema is not None:
        validator_class = _re2_validator_class(jsonschema.validators.validator_for(config.schema))
        error = jsonschema.exceptions.best_match(validator_class(config.schema).iter_errors(value))
        if error is not None:
            location = "/" + "/".join(str(part) for part in error.absolute_path)
            return failed(f"schema violation at {location}: {shorten(error.message, 120)}")
    for pointer, expected in config.expected.items():
        found = resolve_pointer(value, pointer)
        if found is _MISSING:
            return failed(f"{pointer or '(root)'} is missing")
        if not json_equal(found, expected):
            got, wanted = shorten(json.dumps(found), 60), shorten(json.dumps(expected), 60)
            return failed(f"{pointer or '(root)'} is {got}, expected {wanted}")
    if config.equals_answer:
        if answer is None:
            raise VerifierConfigError("answer", "equals_answer needs the task's reference answer")
        try:
            reference = json.loads(answer)
        except ValueError:
            return errored("reference answer is not valid JSON")
        if not json_equal(value, reference):
            return failed(f"value {shorten(json.dumps(value), 60)} differs from the reference")
    checks = [
        name
        for name, on in (
            ("schema", config.schema is not None),
            ("expected values", bool(config.expected)),
            ("reference", config.equals_answer),
        )
        if on
    ]
    return passed("valid JSON" + (f"; {', '.join(checks)} satisfied" if checks else ""))


VERIFIER_KIND = VerifierKind(
    name=KIND,
    parse_config=parse_config,
    check=check,
    batchable=True,
    gameability="text",
    exports=KindExports(),
    examples=(
        KindExample(
            {"kind": KIND, "schema": {"type": "object", "required": ["name"]}, "expected": {"/name": "Ada"}},
            passing='{"name": "Ada"}',
            failing='{"name": "Bob"}',
            answer='{"name": "Ada"}',
        ),
    ),
)
