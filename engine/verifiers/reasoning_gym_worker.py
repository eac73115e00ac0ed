"""reasoning-gym scoring, in a helper process (see helper_loop.py for the protocol).

A generator's ``score_answer(answer, entry)`` is library code, but it reads the model's answer, and
some scorers parse it with sympy's ``parse_expr``, which evaluates it as Python: every score runs
here, never in the worker that asked, under a memory cap, a deadline, an empty environment and an
audit hook that refuses processes, network, file writes and ctypes (helper_loop's lockdown).

Request:  {"dataset": str, "answer": str, "entry": {"question", "answer", "metadata"},
           "timeout_seconds": float}
Response: {"outcome": "scored", "score": float} | {"outcome": "error" | "timeout", "detail": str}
"""

from __future__ import annotations

import math
import os
import sys

if __package__:  # imported as engine.verifiers.reasoning_gym_worker
    from engine.verifiers import helper_loop
else:  # the helper script (python -I): its sibling file, never another installed copy of the package
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import helper_loop  # type: ignore[no-redef]

_scorers: dict[str, object] = {}


def _load() -> None:
    import reasoning_gym  # noqa: F401 - slow (about 2 s): once per helper, before it says it is ready


def scorer(dataset: str):
    """The generator's score_answer function, or None for an unknown generator."""
    if dataset not in _scorers:
        from reasoning_gym.factory import DATASETS, get_score_answer_fn

        if dataset not in DATASETS:
            return None
        _scorers[dataset] = get_score_answer_fn(dataset)
    return _scorers[dataset]


def evaluate(request: dict) -> dict:
    """Score one answer. Raises nothing but the BaseExceptions used to interrupt it."""
    score_answer = scorer(str(request.get("dataset")))
    if score_answer is None:
        return {"outcome": "error", "detail": f"unknown reasoning-gym generator {request.get('dataset')!r}"}
    try:
        score = score_answer(request["answer"], request["entry"])
    except (RecursionError, MemoryError) as error:
        return {"outcome": "scored", "score": 0.0, "detail": f"answer too large to score ({type(error).__name__})"}
    except Exception as error:  # noqa: BLE001 - one bad input must not end the caller
        return {"outcome": "error", "detail": f"score_answer raised {type(error).__name__}: {str(error)[:160]}"}
    try:
        value = float(score)
    except (TypeError, ValueError):
        return {"outcome": "error", "detail": f"score_answer returned {score!r}, not a number"}
    if not math.isfinite(value):
        return {"outcome": "error", "detail": f"score_answer returned {value!r}"}
    return {"outcome": "scored", "score": value}


def _timed_out(request: dict) -> dict:
    return {"outcome": "timeout", "detail": f"scoring took over {request.get('timeout_seconds', 5)}s"}


def main() -> None:
    helper_loop.serve(evaluate, load=_load, timed_out=_timed_out, lockdown=True)


if __name__ == "__main__":
    main()
