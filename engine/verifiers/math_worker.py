"""Math-verify evaluation, and the helper process that runs it for risky inputs.

``evaluate(request)`` is the whole comparison; ``kinds/math.py`` calls it in the calling thread
for ordinary answers. Answers that could make sympy run away (``10^{10^{10}}``, factorials,
huge expressions) go to this module run as a helper: ``python -I math_worker.py <memory_bytes>``
reads one JSON request per line on stdin and writes one JSON response per line on stdout.
There, in a main thread, an interval timer gives a soft deadline that usually returns a clean
"timeout"; when sympy is stuck in C where no signal reaches, the caller kills the process.
The module imports only the standard library at import time (math-verify lazily).

Request:  {"answer": str, "completion": str, "timeout_seconds": float, "float_rounding": int,
           "numeric_precision": int, "strict": bool, "boxed_first": bool}
Response: {"outcome": "pass" | "fail" | "error" | "timeout", "detail": str}
"""

from __future__ import annotations

import json
import logging
import os
import resource
import signal
import sys


class SoftTimeout(BaseException):
    """Raised by the interval timer; a BaseException so math-verify's `except Exception` lets it through."""


def _on_alarm(signum: int, frame: object) -> None:
    raise SoftTimeout()


def _shorten(text: str, limit: int = 80) -> str:
    text = text.replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 3] + "..."


_math_verify = None


def _load_math_verify():
    """Import math-verify once, with its disabled-timeout warning silenced: we bound time ourselves."""
    global _math_verify
    if _math_verify is None:
        import math_verify
        import math_verify.grader
        import math_verify.parser

        math_verify.parser.TIMEOUT_WARNING_SHOWN = True
        math_verify.grader.TIMEOUT_WARNING_SHOWN = True
        _EXTRACTION[True] = [
            math_verify.LatexExtractionConfig(boxed_match_priority=0),
            math_verify.ExprExtractionConfig(),
        ]
        _EXTRACTION[False] = [math_verify.LatexExtractionConfig(), math_verify.ExprExtractionConfig()]
        _math_verify = math_verify
    return _math_verify


_EXTRACTION: dict[bool, list] = {}  # boxed_first -> extraction configs (built once: hashed per call)


def evaluate(request: dict) -> dict:
    """Compare one completion with its reference answer. In: a request as described above.
    Out: a response. Raises nothing but the BaseExceptions used to interrupt it."""
    try:
        return _compare(request, _load_math_verify())
    except RecursionError:
        return {"outcome": "fail", "detail": "answer nested too deeply to evaluate"}
    except MemoryError:
        return {"outcome": "fail", "detail": "answer too large to evaluate"}
    except Exception as error:  # noqa: BLE001 - one bad input must not end the caller
        return {"outcome": "error", "detail": f"math-verify raised {type(error).__name__}: {_shorten(str(error))}"}


def _compare(request: dict, math_verify) -> dict:
    parse, verify = math_verify.parse, math_verify.verify
    answer = request["answer"]
    delimited = any(marker in answer for marker in ("$", "\\boxed", "\\(", "\\["))
    # A bare reference like "x^2+1" or "\\{1,2\\}" is LaTeX math; the delimiters make
    # math-verify read it as such instead of as plain text.
    gold = parse(answer, parsing_timeout=None) if delimited else parse(f"${answer}$", parsing_timeout=None)
    if not gold and not delimited:
        gold = parse(answer, parsing_timeout=None)
    if not gold:
        return {"outcome": "error", "detail": f"reference answer {_shorten(answer)!r} could not be parsed"}
    extraction = _EXTRACTION[bool(request.get("boxed_first", True))]
    predicted = parse(request["completion"], extraction_config=extraction, parsing_timeout=None)
    if not predicted:
        return {"outcome": "fail", "detail": "no final answer found"}
    equal = verify(
        gold,
        predicted,
        float_rounding=int(request.get("float_rounding", 6)),
        numeric_precision=int(request.get("numeric_precision", 15)),
        strict=bool(request.get("strict", True)),
        timeout_seconds=None,
    )
    shown = str(predicted[-1]) if isinstance(predicted[-1], str) else str(predicted[0])
    expected = str(gold[-1]) if isinstance(gold[-1], str) else str(gold[0])
    verb = "matches" if equal else "does not match"
    return {
        "outcome": "pass" if equal else "fail",
        "detail": f"answer {_shorten(shown)!r} {verb} {_shorten(expected)!r}",
    }


def main() -> None:
    memory_bytes = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    if memory_bytes:
        # A huge power or factorial fails fast with MemoryError instead of swapping the host.
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    logging.disable(logging.WARNING)
    _load_math_verify()
    signal.signal(signal.SIGALRM, _on_alarm)
    respond({"ready": True})
    for line in _lines(0):
        try:
            request = json.loads(line)
        except ValueError:
            respond({"outcome": "error", "detail": "malformed request"})
            continue
        signal.setitimer(signal.ITIMER_REAL, float(request.get("timeout_seconds", 5)))
        try:
            response = evaluate(request)
        except SoftTimeout:
            response = {
                "outcome": "timeout",
                "detail": f"math verification took over {request.get('timeout_seconds', 5)}s",
            }
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        respond(response)


def respond(response: dict) -> None:
    data = (json.dumps(response) + "\n").encode()
    while data:
        data = data[os.write(1, data) :]


def _lines(fd: int):
    """Request lines from a raw descriptor: no text-layer buffering between the caller and us."""
    buffer = b""
    while True:
        while b"\n" not in buffer:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return
            buffer += chunk
        line, buffer = buffer.split(b"\n", 1)
        yield line


if __name__ == "__main__":
    main()
