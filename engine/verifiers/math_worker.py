"""Math-verify evaluation, and the helper process that runs it for risky inputs.

``evaluate(request)`` is the whole comparison; ``kinds/math.py`` calls it in the calling thread
for ordinary answers. Answers that could make sympy run away (``10^{10^{10}}``, factorials,
huge expressions) go to this module run as a helper: ``python -I math_worker.py <memory_bytes>``
reads one JSON request per line on stdin and writes one JSON response per line on stdout.
There, in a main thread, an interval timer gives a soft deadline that usually returns a clean
"timeout"; when sympy is stuck in C where no signal reaches, the caller kills the process.
The module imports only the standard library at import time (math-verify lazily).

Request:  {"answer": str, "completion": str, "prompt": str, "timeout_seconds": float,
           "float_rounding": int, "numeric_precision": int, "strict": bool, "boxed_first": bool}
Response: {"outcome": "pass" | "fail" | "error" | "timeout", "detail": str}
"""

from __future__ import annotations

import json
import logging
import os
import re
import resource
import signal
import sys
from typing import Any


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
    stated = predicted[-1] if isinstance(predicted[-1], str) else ""
    problem = hedge_problem(stated, answer, predicted[0])
    if problem:
        return {"outcome": "fail", "detail": problem}
    result = final_result(stated, request.get("prompt") or "", answer)
    if result is None:
        return {"outcome": "fail", "detail": f"answer {_shorten(stated)!r} restates the question's expression"}
    if result != stated:
        predicted = parse(f"${result}$", parsing_timeout=None)
        if not predicted:
            return {"outcome": "fail", "detail": f"no value in {_shorten(stated)!r}"}
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


# Operators math-verify reads as "keep the right-hand side": a boxed "41 \\lor 42" would match 42
# and 41 alike. An answer using one the reference does not use is hedging between values.
_HEDGES = re.compile(
    r"\\(?:lor|land|vee|wedge|bigvee|bigwedge|cup|cap|bigcup|bigcap|sqcup|sqcap|uplus|setminus|smallsetminus"
    r"|oplus|ominus|otimes|oslash|odot|mid|nmid|parallel|approx|sim|simeq|cong|equiv|propto|asymp|doteq"
    r"|to|rightarrow|leftarrow|Rightarrow|Leftarrow|implies|impliedby|iff|leftrightarrow|Leftrightarrow"
    r"|longrightarrow|Longrightarrow|mapsto|gets|vdash|models|lnot|neg|lor|vert|Vert|lvert|rvert|lVert|rVert"
    r"|triangleleft|triangleright|star|diamond|bowtie|wr|amalg|perp|between|Join)(?![A-Za-z])"
    r"|\\\\|\\or(?![A-Za-z])|\|"
)


def hedge_problem(stated: str, reference: str, value: Any) -> str:
    """Why the stated answer hedges between values, or "" (absolute values |x| are fine)."""
    used = {match.group(0) for match in _HEDGES.finditer(stated)} - {
        match.group(0) for match in _HEDGES.finditer(reference)
    }
    if used <= {"|", "\\vert", "\\lvert", "\\rvert"} and used:
        try:
            from sympy import Abs

            if getattr(value, "has", None) is not None and value.has(Abs):
                used = set()
        except Exception:  # noqa: BLE001
            pass
    if not used:
        return ""
    return f"answer {_shorten(stated)!r} combines values with {sorted(used)[0]}: one final answer is needed"


_BINARY_OPERATION = re.compile(r"[\w)\]]\s*(?:[-+*/^]|\\cdot|\\times|\\div)")
_LAYOUT = re.compile(r"\s+|\$|\\left|\\right|\\[,;:!]|\\displaystyle|[{}]")


def _normalize(text: str) -> str:
    text = text.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    text = text.replace("\\cdot", "*").replace("\\times", "*").replace("\u00d7", "*").replace("\u00b7", "*")
    text = text.replace("\\div", "/").replace("\u00f7", "/")
    return _LAYOUT.sub("", text)


def _top_level_sides(stated: str) -> list[str]:
    """``a = b = c`` split at the equals signs outside brackets (not <=, >=, !=)."""
    sides, depth, start = [], 0, 0
    for index, character in enumerate(stated):
        if character in "({[":
            depth += 1
        elif character in ")}]":
            depth = max(0, depth - 1)
        elif character == "=" and depth == 0 and (index == 0 or stated[index - 1] not in "<>!:"):
            sides.append(stated[start:index])
            start = index + 1
    sides.append(stated[start:])
    return [side.strip() for side in sides if side.strip()]


def final_result(stated: str, prompt: str, reference: str = "") -> str | None:
    """The stated result: the last side of ``a = b = c`` that is not an unevaluated copy of an
    expression in the question ("2 + 6" for "What is 2 + 6?"). None when every side is one."""
    if not prompt or not stated:
        return stated
    question = _normalize(prompt)
    sides = _top_level_sides(stated)

    def is_copy(side: str) -> bool:
        normalized = _normalize(side)
        return bool(_BINARY_OPERATION.search(side)) and len(normalized) >= 3 and normalized in question

    if reference and is_copy(reference):
        return stated  # the task's answer is itself an expression from the question
    kept = [side for side in sides if not is_copy(side)]
    if not kept:
        return None
    return stated if kept[-1] == sides[-1] else kept[-1]


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
