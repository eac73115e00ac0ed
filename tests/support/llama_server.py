"""The real inference server of the suite: llama.cpp's llama-server serving SmolLM2-135M on the CPU.

`make test` builds it once (scripts/llama-server.sh, cached outside the clone), starts it and names it
in PASSBAND_TEST_LLAMA_SERVER; tests that need it take the `llama_server` fixture. Fault tests start
a private one (`LlamaServer`) that they may kill and restart without disturbing the others.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "llama-server.sh"


def shared_server_url() -> str:
    """The root URL of the suite's llama-server (no /v1). Skips when it is not running, or fails when
    make test promised one (PASSBAND_REQUIRE_LLAMA_SERVER=1)."""
    url = os.environ.get("PASSBAND_TEST_LLAMA_SERVER", "").rstrip("/")
    if url and _answers_within(url, seconds=SHARED_SERVER_PATIENCE_S):
        return url
    problem = (
        f"llama-server {url or '(PASSBAND_TEST_LLAMA_SERVER unset)'} does not answer; "
        "`make test` starts it, or run scripts/llama-server.sh start and set PASSBAND_TEST_LLAMA_SERVER"
    )
    if os.environ.get("PASSBAND_REQUIRE_LLAMA_SERVER") == "1":
        pytest.fail(problem)
    pytest.skip(problem)


# How long the shared server may take to answer its health check: on a busy machine (both test processes, a
# campaign's requests at the server, other jobs) one answer can take many seconds, and this fixture's failure
# would stand for the rest of the process's tests.
SHARED_SERVER_PATIENCE_S = 120


def _healthy(url: str, *, timeout: float = 2) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=timeout).status_code == 200
    except httpx.HTTPError:
        return False


def _answers_within(url: str, *, seconds: float) -> bool:
    """Whether the server answers its health check within `seconds`: asked again while it is slow or
    refusing, and a refused connection is asked again only briefly (nothing listens there)."""
    deadline = time.monotonic() + seconds
    refused = 0
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/health", timeout=30).status_code == 200:
                return True
        except httpx.ConnectError:
            refused += 1
            if refused >= 5:
                return False
        except httpx.HTTPError:
            pass
        time.sleep(1)
    return False


def detokenize(url: str, ids: list[int]) -> str:
    """The server's own text for `ids` (its /detokenize endpoint)."""
    response = httpx.post(f"{url}/detokenize", json={"tokens": ids}, timeout=120)
    response.raise_for_status()
    return response.json()["content"]


def completion_text(url: str, ids: list[int]) -> str:
    """The text a completion of `ids` reads as: the server's own detokenisation, without the end-of-turn
    token the ids end with when the model stopped (stored ids keep it; the text leaves it out)."""
    text = detokenize(url, ids)
    end = httpx.get(f"{url}/props", timeout=120).json().get("eos_token") or ""
    return text[: -len(end)] if end and text.endswith(end) else text


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class LlamaServer:
    """A private llama-server on a free port, which a test may kill and start again on the same port."""

    def __init__(self, *, slots: int = 2, context: int = 4096) -> None:
        self.binary = _script("binary")
        self.model = _script("model")
        self.port = free_port()
        self.slots, self.context = slots, context
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, *, timeout: float = 60) -> LlamaServer:
        self.process = subprocess.Popen(
            [
                self.binary,
                "-m",
                self.model,
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "-c",
                str(self.context),
                "-np",
                str(self.slots),
                "-t",
                "1",
                "--no-webui",
                "--metrics",
                "--no-repack",  # as scripts/llama-server.sh: ggml's AMX path can segfault in a VM
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while not _healthy(self.url):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"llama-server on port {self.port} did not start")
            time.sleep(0.2)
        return self

    def kill(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.kill()


def _script(command: str) -> str:
    if os.environ.get("PASSBAND_REQUIRE_LLAMA_SERVER") != "1" and not os.environ.get("PASSBAND_TEST_LLAMA_SERVER"):
        pytest.skip("llama-server is not set up here: `make test` builds and starts it")
    result = subprocess.run(["bash", str(SCRIPT), command], capture_output=True, text=True, cwd=ROOT, timeout=1800)
    if result.returncode != 0:
        pytest.fail(f"scripts/llama-server.sh {command} failed: {result.stderr[-2000:]}")
    return result.stdout.strip().splitlines()[-1]
