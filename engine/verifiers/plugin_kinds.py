"""Installed verifier kinds run out of process: the proxy the registry hands out for each one.

An installed kind's ``parse_config``, ``check``, audit hooks, page context and Harbor export are plug-in code
that reads model-written completions, so none of them runs in a worker or web process: each call is a JSON
request to a helper process (engine/verifiers/plugin_worker.py) that imports the kind's entry point, under a
memory cap, a deadline (the kind's ``check_seconds``), an empty environment and helper_loop's lockdown (no
processes, network, file writes or ctypes). A config is parsed there and kept here as its canonical JSON; a
missed deadline is a ``timeout``, a crash or a dead helper an ``error``, never a fail.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.sandbox.worker_pool import HelperScript, WorkerFailed, WorkerTimeout
from engine.verifiers.base import Check, VerifierConfigError
from engine.verifiers.kind import HarborTask, KindExports, VerifierKind

WORKER_SCRIPT = Path(__file__).resolve().parent / "plugin_worker.py"
WORKER_MEMORY_BYTES = 1 << 30
HARD_LIMIT_GRACE_SECONDS = 1.0


@dataclass(frozen=True)
class IsolatedConfig:
    """An installed kind's config as this process keeps it: the raw config its helper accepted."""

    raw: dict[str, Any]


class _Helpers:
    """Requests to the helper processes of one installed kind."""

    def __init__(self, name: str, *, source: str, seconds: float) -> None:
        self.name = name
        self.seconds = float(seconds)
        self.script = HelperScript(WORKER_SCRIPT, memory_bytes=WORKER_MEMORY_BYTES, arguments=(source,))

    def call(self, op: str, raw: Mapping[str, Any], **fields: Any) -> dict[str, Any]:
        request = {"op": op, "raw": dict(raw), "timeout_seconds": self.seconds, **fields}
        try:
            response = self.script.pool().call(
                json.loads(json.dumps(request, default=str)), timeout=self.seconds + HARD_LIMIT_GRACE_SECONDS
            )
        except WorkerTimeout:
            return {"outcome": "timeout", "detail": f"kind {self.name} took over {self.seconds:g}s; helper killed"}
        except WorkerFailed as error:
            return {"outcome": "error", "detail": f"kind {self.name}'s helper process failed: {error}"}
        if "config_error" in response:
            field, problem = response["config_error"]
            raise VerifierConfigError(str(field), str(problem))
        return response

    def parse_config(self, raw: dict[str, Any]) -> IsolatedConfig:
        response = self.call("parse", raw)
        if not response.get("ok"):
            # The config could not be checked (the helper timed out or failed): not the author's mistake to
            # blame on a field, but nothing may be imported unchecked.
            raise VerifierConfigError("kind", f"{self.name}: the config could not be checked: {response.get('detail')}")
        return IsolatedConfig(raw=dict(raw))

    def check(self, config: IsolatedConfig, *, completion: Any, answer: str | None, prompt: Any = None) -> Check:
        response = self.call("check", config.raw, completion=completion, answer=answer, prompt=prompt)
        return Check(str(response.get("outcome", "error")), str(response.get("detail", "")))

    def reference_completion(self, config: IsolatedConfig, answer: str | None) -> Any:
        response = self.call("reference", config.raw, answer=answer)
        return response.get("completion", answer)

    def audit_failing_completions(self, config: IsolatedConfig, answer: str | None) -> list[tuple[str, Any]]:
        response = self.call("failing", config.raw, answer=answer)
        return [(str(label), completion) for label, completion in response.get("completions", [])]

    def audit_task(self, config: IsolatedConfig, answer: str | None) -> list[str]:
        response = self.call("audit_task", config.raw, answer=answer)
        if "problems" not in response:
            return [f"the kind's own audit did not run: {response.get('detail', 'no answer')}"]
        return [str(problem) for problem in response["problems"]]

    def page_context(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        return dict(self.call("page_context", raw).get("context") or {})

    def harbor(self, task: HarborTask) -> dict[str, bytes]:
        response = self.call("harbor", task.raw_config, key=task.key, prompt=task.prompt, answer=task.answer)
        if "files" not in response:
            raise RuntimeError(f"kind {self.name} could not write a Harbor folder: {response.get('detail')}")
        return {str(path): base64.b64decode(data) for path, data in response["files"].items()}


def isolated(declared: VerifierKind, *, source: str) -> VerifierKind:
    """The kind as the registry hands it out: the declared traits, every hook a request to helpers that load
    it from ``source``, its entry point's value (``package.module:OBJECT``)."""
    helpers = _Helpers(declared.name, source=source, seconds=declared.check_seconds)
    exports = declared.exports
    if exports is not None and exports.harbor is not None:
        exports = KindExports(package=exports.package, harbor=helpers.harbor)
    return dataclasses.replace(
        declared,
        parse_config=helpers.parse_config,
        check=helpers.check,
        reference_completion=helpers.reference_completion,
        audit_failing_completions=helpers.audit_failing_completions,
        audit_task=helpers.audit_task if declared.audit_task is not None else None,
        page_context=helpers.page_context if declared.page_context is not None else None,
        exports=exports,
    )
