"""An installed verifier kind's code, in a helper process (see helper_loop.py for the protocol).

Run as ``python -I plugin_worker.py <memory_bytes> <entry point value>``: loads the kind that value of the
``passband.verifiers`` group names (``package.module:OBJECT``) and answers requests for it under
helper_loop's lockdown.

Request:  {"op": "parse" | "check" | "reference" | "failing" | "audit_task" | "page_context" | "harbor",
           "raw": the verifier config, "timeout_seconds": float, and per op "completion", "answer", "prompt",
           "key"}
Response: {"ok": true} (parse) | {"outcome", "detail"} (check) | {"completion"} | {"completions"} |
          {"problems"} | {"context"} | {"files": {path: base64}} | {"config_error": [field, problem]} |
          {"outcome": "error" | "timeout", "detail"} when the kind crashed or ran out of time
"""

from __future__ import annotations

import base64
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
if __package__:  # imported as engine.verifiers.plugin_worker
    from engine.verifiers import helper_loop
else:  # the helper script (python -I): this checkout's engine first, then the installed kind's package
    sys.path.insert(0, HERE)
    sys.path.insert(1, os.path.dirname(os.path.dirname(HERE)))
    import helper_loop  # type: ignore[no-redef]

GROUP = "passband.verifiers"
_state: dict = {"kind": None, "configs": {}}


def _load() -> None:
    from importlib import metadata

    _state["kind"] = metadata.EntryPoint(name="kind", value=sys.argv[2], group=GROUP).load()


def _config(raw: dict):
    canonical = json.dumps(raw, sort_keys=True)
    configs = _state["configs"]
    if canonical not in configs:
        if len(configs) > 512:
            configs.clear()
        configs[canonical] = _state["kind"].parse_config(dict(raw))
    return configs[canonical]


def _answer(op: str, request: dict) -> dict:
    kind = _state["kind"]
    config = _config(request["raw"])
    answer = request.get("answer")
    if op == "parse":
        return {"ok": True}
    if op == "check":
        outcome, detail = kind.check(
            config, completion=request.get("completion"), answer=answer, prompt=request.get("prompt")
        )
        return {"outcome": str(outcome), "detail": str(detail)}
    if op == "reference":
        return {"completion": kind.reference_completion(config, answer)}
    if op == "failing":
        return {
            "completions": [[label, completion] for label, completion in kind.audit_failing_completions(config, answer)]
        }
    if op == "audit_task":
        return {"problems": [str(problem) for problem in kind.audit_task(config, answer)]}
    if op == "page_context":
        return {"context": kind.page_context(request["raw"])}
    if op == "harbor":
        from engine.verifiers.kind import HarborTask

        task = HarborTask(
            key=str(request.get("key")),
            prompt=str(request.get("prompt") or ""),
            answer=str(answer or ""),
            raw_config=request["raw"],
            config=config,
            read_snapshot=_no_snapshots,
        )
        files = kind.exports.harbor(task)
        return {"files": {str(path): base64.b64encode(bytes(data)).decode() for path, data in files.items()}}
    return {"outcome": "error", "detail": f"unknown request {op!r}"}


def _no_snapshots(digest: str) -> bytes:
    raise LookupError("an installed kind's Harbor export cannot read Passband's snapshots")


def evaluate(request: dict) -> dict:
    """Answer one request; the kind's errors become answers, never the helper's end."""
    from engine.verifiers.base import VerifierConfigError, shorten

    try:
        response = _answer(str(request.get("op")), request)
        json.dumps(response)
        return response
    except VerifierConfigError as error:
        return {"config_error": [error.field, error.problem]}
    except RecursionError:
        return {"outcome": "fail", "detail": "completion nested too deeply to check"}
    except Exception as error:  # noqa: BLE001 - the kind's crash is an error verdict, never a fail
        return {"outcome": "error", "detail": f"verifier crashed: {type(error).__name__}: {shorten(str(error), 120)}"}


def _timed_out(request: dict) -> dict:
    return {"outcome": "timeout", "detail": f"the kind took over {request.get('timeout_seconds', 5)}s"}


def main() -> None:
    helper_loop.serve(evaluate, load=_load, timed_out=_timed_out, lockdown=True, lock_load=True)


if __name__ == "__main__":
    main()
