"""HTTP and retries for the openai backend: one POST, which failures are worth another try, the
backoff between tries, and the request events that metrics observe."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import Any, TypeVar

import httpx
import orjson

from engine.backends.openai_servers import says_prompt_too_long
from engine.outbound import OutboundRefused

logger = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({408, 425, 429}) | frozenset(range(500, 600))
Result = TypeVar("Result")

# Observers of requests, for metrics: each is called as hook(event, labels) with event "request"
# (labels server, result: ok, retry or error) or "retry" (labels server, reason). Errors in a hook are logged.
EVENT_HOOKS: list[Callable[[str, dict[str, str]], None]] = []


def emit(event: str, **labels: str) -> None:
    for hook in EVENT_HOOKS:
        try:
            hook(event, labels)
        except Exception:  # noqa: BLE001 - observing must never break sampling
            logger.exception("openai backend event hook failed")


class RetryableError(Exception):
    """A failure worth another try (429, 5xx, timeout, dropped connection); `reason` names its kind."""

    def __init__(self, message: str, *, retry_after_s: float | None = None, reason: str = "other") -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s
        self.reason = reason


class FinalError(Exception):
    """A failure that another try would repeat (a 4xx other than 429, a malformed answer)."""


class PromptTooLongError(FinalError):
    """The server refused the prompt: with max tokens it exceeds the model's context (the task's fault)."""


class FewerChoicesError(FinalError):
    """Asked for n choices, the answer held fewer (a server that ignores or caps `n`)."""


def with_retries(
    attempt: Callable[[], Result], *, server: str, max_retries: int, backoff_s: Callable[[int, float | None], float]
) -> tuple[Result | None, list[str]]:
    """`attempt()` until it returns, raises FinalError, or has raised RetryableError `max_retries` + 1
    times; sleeps `backoff_s(attempt number, the server's Retry-After)` between tries. Returns the
    result (None when every try failed) and the failures' messages, emitting the request events."""
    failures: list[str] = []
    for number in range(max_retries + 1):
        try:
            result = attempt()
        except (PromptTooLongError, FewerChoicesError):
            # Not failures of the server: the caller handles each its own way (a task error, one
            # sample per request).
            emit("request", server=server, result="error")
            raise
        except FinalError as error:
            failures.append(str(error))
            break
        except RetryableError as error:
            failures.append(str(error))
            if number == max_retries:
                break
            emit("request", server=server, result="retry")
            emit("retry", server=server, reason=error.reason)
            time.sleep(backoff_s(number, error.retry_after_s))
        else:
            emit("request", server=server, result="ok")
            return result, failures
    emit("request", server=server, result="error")
    return None, failures


def failure_message(*, server: str, failures: list[str]) -> str:
    """What a request that finally failed records as its error."""
    return f"{server} failed after {len(failures)} tries: " + "; ".join(failures[-3:])


def backoff_s(*, attempt: int, retry_after_s: float | None, base_s: float, max_s: float) -> float:
    """Exponential backoff from `base_s`, capped at `max_s`, honouring the server's Retry-After."""
    # Jitter keeps the workers that a 429 stopped together from retrying together.
    delay = min(max_s, base_s * 2**attempt) * random.uniform(0.5, 1.0)
    if retry_after_s is not None:
        delay = max(delay, min(retry_after_s, max_s))
    return delay


def post_raw(client: httpx.Client, *, url: str, body: dict[str, Any]) -> bytes:
    """POST `body`; the answer's bytes when the status is a success. Raises RetryableError or FinalError."""
    try:
        response = client.post(url, content=orjson.dumps(body))
    except httpx.TransportError as error:  # timeouts, refused and dropped connections
        raise RetryableError(f"{type(error).__name__}: {error}", reason="transport") from error
    except OutboundRefused as error:  # the outbound policy: another try would be refused again
        raise FinalError(f"refused by the outbound policy: {error}") from error
    if response.status_code in RETRY_STATUSES:
        raise RetryableError(
            f"HTTP {response.status_code}: {_error_text(response)}",
            retry_after_s=_retry_after_s(response),
            reason=f"http_{response.status_code}",
        )
    if response.is_redirect:  # never followed: the outbound policy checked this address, not the next
        raise FinalError(
            f"HTTP {response.status_code}: a redirect to {response.headers.get('location', '')!r}, not followed"
        )
    if response.status_code >= 400:
        message = f"HTTP {response.status_code}: {_error_text(response)}"
        if response.status_code in (400, 413, 422) and says_prompt_too_long(response.text[:2000]):
            raise PromptTooLongError(message)
        raise FinalError(message)
    return response.content


def json_object(raw: bytes) -> dict[str, Any]:
    """`raw` as a JSON object. Raises RetryableError when it is not JSON, FinalError when not an object."""
    try:
        payload = orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        raise RetryableError(
            f"response is not JSON: {raw[:200].decode(errors='replace')!r}", reason="invalid_json"
        ) from error
    if not isinstance(payload, dict):
        raise FinalError(f"response is not a JSON object: {raw[:200].decode(errors='replace')!r}")
    return payload


def _error_text(response: httpx.Response) -> str:
    try:
        payload = response.json()
    except ValueError:
        return response.text[:300]
    error = payload.get("error") if isinstance(payload, dict) else None
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])[:300]
    if isinstance(payload, dict) and payload.get("message"):
        return str(payload["message"])[:300]
    return str(payload)[:300]


def _retry_after_s(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # an HTTP date: rare from model servers, and the backoff covers it
