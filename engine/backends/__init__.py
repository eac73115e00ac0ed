"""Model backends behind one small interface. Pure Python: no Django; settings come in as arguments.

    backend = backend_for(BackendOptions(kind="transformers"))      # SmolLM2-135M-Instruct, in process
    backend = backend_for(BackendOptions(kind="openai", model="Qwen/Qwen2.5-7B-Instruct",
                                         base_url="http://gpu-1:8000/v1", api_key_env="VLLM_API_KEY"))
    seeds = [rollout_seed(campaign_seed=7, task_version_hash=h, sample_index=i) for i in range(8)]
    generations = backend.generate(messages=[{"role": "user", "content": "..."}], seeds=seeds,
                                   params=SamplingParams(temperature=0.7, max_new_tokens=256))

`backend_for` keeps one backend per configuration (its BackendOptions) per process, so a worker loads its model once.
The heavy modules (torch, transformers) are imported only when a transformers backend is asked for.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

from engine.backends.base import (
    Backend,
    FinishReason,
    Generation,
    SamplingParams,
    rollout_seed,
)
from engine.backends.openai_backend import OpenAIBackend

__all__ = [
    "BACKEND_KINDS",
    "Backend",
    "BackendOptions",
    "FinishReason",
    "Generation",
    "SamplingParams",
    "backend_for",
    "backends_clear",
    "rollout_seed",
]

BACKEND_KINDS = ("transformers", "openai")

_backends: dict[BackendOptions, Backend] = {}
_backends_pid = os.getpid()
_backends_lock = threading.Lock()


@dataclass(frozen=True)
class BackendOptions:
    """One probe-model configuration, and the key ``backend_for`` keeps its backend under.

    `kind` is "transformers" (in process; `model` is "" or "smollm2-135m-instruct" for the embedded
    default, a .gguf file, or a model folder on disk; `device` None picks CUDA when there is one) or
    "openai" (`base_url` of an OpenAI-compatible server, `model` as it serves it, the API key in the
    environment variable `api_key_env`, `endpoint` "chat" or "completions", `timeout_s` per request,
    at most `max_concurrency` requests in flight, up to `samples_per_request` consecutive seeds in one
    request, for servers that seed choice i with seed + i as vLLM does, `server` the kind of server
    (openai_servers.SERVER_KINDS: what to ask it, what its answers mean), `tool_mode` "native" or
    "text" ("" for the server's default)).
    """

    kind: str
    model: str = ""
    base_url: str = ""
    api_key_env: str = ""
    revision: str = ""
    device: str | None = None
    endpoint: str = "chat"
    timeout_s: float = 120.0
    max_concurrency: int = 16
    samples_per_request: int = 1
    server: str = "vllm"
    tool_mode: str = ""


def backend_for(options: BackendOptions) -> Backend:
    """The backend for one probe-model configuration, created on first use and kept for the process.
    Raises ValueError for an unknown kind or a missing setting. A forked child (a prefork worker) never
    reuses its parent's backends: threads, sockets and CUDA contexts do not survive a fork."""
    global _backends_pid
    if options.kind not in BACKEND_KINDS:
        raise ValueError(f"unknown backend kind {options.kind!r}; expected one of {BACKEND_KINDS}")
    with _backends_lock:
        if _backends_pid != os.getpid():
            _backends.clear()
            _backends_pid = os.getpid()
        backend = _backends.get(options)
        if backend is None:
            backend = _create_backend(options)
            _backends[options] = backend
        return backend


def backends_clear() -> None:
    """Forget every backend of this process (closing HTTP clients), e.g. after settings change."""
    with _backends_lock:
        for backend in _backends.values():
            close = getattr(backend, "close", None)
            if callable(close):
                close()
        _backends.clear()


def _create_backend(options: BackendOptions) -> Backend:
    if options.kind == "transformers":
        # Imported here, not at the top: it loads torch, which API-only processes never need.
        from engine.backends.transformers_backend import TransformersBackend

        return TransformersBackend(model=options.model, revision=options.revision, device=options.device)
    if not options.base_url:
        raise ValueError("the openai backend needs base_url, e.g. http://gpu-1:8000/v1")
    return OpenAIBackend(
        base_url=options.base_url,
        model=options.model,
        api_key_env=options.api_key_env,
        revision=options.revision,
        endpoint=options.endpoint,
        timeout_s=options.timeout_s,
        max_concurrency=options.max_concurrency,
        samples_per_request=options.samples_per_request,
        server=options.server,
        tool_mode=options.tool_mode,
    )
