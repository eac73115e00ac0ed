"""Probe models: registering one, its backend, its sampling parameters and what a rollout costs."""

from __future__ import annotations

import logging
from decimal import Decimal

from calibration.errors import CalibrationError
from calibration.models import ProbeModel
from engine import backends, outbound
from engine.backends.openai_servers import SERVER_KINDS, TOOL_MODES, profile_for

logger = logging.getLogger(__name__)


def probe_model_add(
    *,
    name: str,
    backend: str,
    model: str = "",
    revision: str = "",
    base_url: str = "",
    api_key_env: str = "",
    temperature: float = 0.7,
    top_p: float = 0.95,
    max_new_tokens: int = 256,
    stop: list[str] | None = None,
    usd_per_gpu_hour: Decimal | float = 0,
    gpus: int = 1,
    usd_per_million_input_tokens: Decimal | float = 0,
    usd_per_million_output_tokens: Decimal | float = 0,
    strong: bool = False,
    samples_per_request: int = 1,
    server: str = "vllm",
    endpoint: str = "chat",
    timeout_s: float = 120.0,
    max_concurrency: int = 16,
    tool_mode: str = "",
    run: str = "",
    checkpoint_step: int | None = None,
) -> ProbeModel:
    """Register a probe model. Raises CalibrationError for an unknown backend or a missing URL.

    `samples_per_request` > 1 (openai backend) sends a round's consecutive seeds as one request
    with n samples; only for servers that seed choice i with seed + i (vLLM, llama.cpp). `server`
    (engine/backends/openai_servers.py) decides what is asked of the server for exact capture;
    `endpoint`, `timeout_s`, `max_concurrency` and `tool_mode` configure the openai backend.
    `run` and `checkpoint_step` make it a checkpoint of a training run (docs/prediction.md).
    """
    if backend not in ProbeModel.Backend.values:
        raise CalibrationError(f"Unknown backend {backend!r}; use one of {', '.join(ProbeModel.Backend.values)}.")
    if backend == ProbeModel.Backend.OPENAI and not (base_url and model):
        raise CalibrationError("The openai backend needs --base-url and --model.")
    probe_model_endpoint_check(base_url=base_url, api_key_env=api_key_env)
    if ProbeModel.objects.filter(name=name).exists():
        raise CalibrationError(f"A probe model named {name!r} already exists.")
    if not 0 <= temperature <= 5 or not 0 < top_p <= 1 or max_new_tokens < 1:
        raise CalibrationError("Need 0 <= temperature <= 5, 0 < top_p <= 1 and max_new_tokens >= 1.")
    _serving_check(
        samples_per_request=samples_per_request,
        server=server,
        endpoint=endpoint,
        timeout_s=timeout_s,
        max_concurrency=max_concurrency,
        tool_mode=tool_mode,
    )
    _checkpoint_check(run=run, checkpoint_step=checkpoint_step)
    return ProbeModel.objects.create(
        name=name,
        backend=backend,
        model=model,
        revision=revision,
        base_url=base_url,
        api_key_env=api_key_env,
        temperature=temperature,
        top_p=top_p,
        max_new_tokens=max_new_tokens,
        stop=stop or [],
        usd_per_gpu_hour=Decimal(str(usd_per_gpu_hour)),
        gpus=gpus,
        usd_per_million_input_tokens=Decimal(str(usd_per_million_input_tokens)),
        usd_per_million_output_tokens=Decimal(str(usd_per_million_output_tokens)),
        strong=strong,
        samples_per_request=samples_per_request,
        server=server,
        endpoint=endpoint,
        timeout_s=timeout_s,
        max_concurrency=max_concurrency,
        tool_mode=tool_mode,
        run=run,
        checkpoint_step=checkpoint_step,
    )


def _serving_check(
    *, samples_per_request: int, server: str, endpoint: str, timeout_s: float, max_concurrency: int, tool_mode: str
) -> None:
    """CalibrationError naming the first of the openai backend's serving settings that is out of range."""
    if not 1 <= samples_per_request <= 1024:
        raise CalibrationError(f"Samples per request must lie between 1 and 1024; got {samples_per_request}.")
    if server not in SERVER_KINDS:
        raise CalibrationError(f"Unknown server {server!r}; use one of {', '.join(SERVER_KINDS)}.")
    if samples_per_request > 1 and not profile_for(server).seeds_choices:
        raise CalibrationError(
            f"A {server} server does not seed choice i of n with seed + i: samples per request must be 1."
        )
    if endpoint not in ("chat", "completions"):
        raise CalibrationError(f"Endpoint must be chat or completions; got {endpoint!r}.")
    if not 0 < timeout_s <= 3600 or not 1 <= max_concurrency <= 1024:
        raise CalibrationError("Need 0 < timeout <= 3600 seconds and 1 <= max concurrency <= 1024.")
    if tool_mode not in ("", *TOOL_MODES):
        raise CalibrationError(f"Tool mode must be native or text; got {tool_mode!r}.")


def _checkpoint_check(*, run: str, checkpoint_step: int | None) -> None:
    """CalibrationError unless a checkpoint names both its run and its step, and the step is new to the run."""
    if bool(run) != (checkpoint_step is not None):
        raise CalibrationError("A checkpoint needs both its run and its checkpoint step.")
    if run and ProbeModel.objects.filter(run=run, checkpoint_step=checkpoint_step).exists():
        raise CalibrationError(f"Run {run!r} already has a checkpoint at step {checkpoint_step}.")


def probe_model_update(*, probe_model: ProbeModel, max_new_tokens: int, temperature: float | None = None) -> ProbeModel:
    """Change a probe model's default completion budget (and temperature). Campaigns already
    started keep the budget they started with."""
    temperature = probe_model.temperature if temperature is None else temperature
    if not 1 <= max_new_tokens <= 32768:
        raise CalibrationError(f"Max new tokens must lie between 1 and 32768; got {max_new_tokens}.")
    if not 0 <= temperature <= 5:
        raise CalibrationError(f"Temperature must lie between 0 and 5; got {temperature}.")
    probe_model.max_new_tokens = max_new_tokens
    probe_model.temperature = temperature
    probe_model.save(update_fields=["max_new_tokens", "temperature"])
    return probe_model


def probe_model_endpoint_check(*, base_url: str, api_key_env: str) -> None:
    """Hold a probe model's endpoint to the outbound policy (engine/outbound): the base URL is no
    non-global address unless the operator allows its host, and the key variable is one the operator
    declared for the URL's origin, never the process's own configuration. Raises CalibrationError.
    Sampling enforces the same rules again on the worker, so a record edited another way gains nothing."""
    if base_url and (problem := outbound.url_problem(base_url)):
        raise CalibrationError(f"base url: {problem}.")
    if api_key_env and not base_url:
        raise CalibrationError("api key env: only a model reached by URL (the openai backend) takes a key.")
    if api_key_env and (problem := outbound.secret_problem(api_key_env, url=base_url)):
        raise CalibrationError(f"api key env: {problem}.")


def backend_for_probe_model(probe_model: ProbeModel) -> backends.Backend:
    return backends.backend_for(backend_options(probe_model))


def backend_options(probe_model: ProbeModel) -> backends.BackendOptions:
    """The backend configuration of `probe_model` (the key its backend is kept under in a worker)."""
    return backends.BackendOptions(
        kind=probe_model.backend,
        model=probe_model.model,
        base_url=probe_model.base_url,
        api_key_env=probe_model.api_key_env,
        revision=probe_model.revision,
        samples_per_request=probe_model.samples_per_request,
        server=probe_model.server,
        endpoint=probe_model.endpoint,
        timeout_s=probe_model.timeout_s,
        max_concurrency=probe_model.max_concurrency,
        tool_mode=probe_model.tool_mode,
    )


def sampling_params(probe_model: ProbeModel, *, max_new_tokens: int | None = None) -> backends.SamplingParams:
    """The model's sampling parameters; `max_new_tokens` (a campaign's budget) overrides its own."""
    return backends.SamplingParams(
        temperature=probe_model.temperature,
        top_p=probe_model.top_p,
        max_new_tokens=max_new_tokens or probe_model.max_new_tokens,
        stop=tuple(probe_model.stop),
    )
