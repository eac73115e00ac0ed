"""Benchmark the transformers backend on the CPU with the embedded SmolLM2-135M-Instruct.

Measures
  * load time: from the GGUF file (dequantise + convert + write the safetensors cache), then from the
    cache in the same process, then a worker's cold start from the cache in a fresh process (imports
    included);
  * decoding throughput of `TransformersBackend.generate` (generated tokens per second, all rows
    together) at each batch size, next to `model.generate` of transformers on the same prompt and
    settings as a reference for the cost of the per-seed sampling loop.

Run from the repository root (nothing is downloaded; the GGUF conversion goes to a temporary cache):

    .venv/bin/python bench/backends/transformers_cpu.py --batch-sizes 1 16 --new-tokens 64 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
REPOSITORY_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPOSITORY_ROOT))

import torch  # noqa: E402  (after the offline switch)

from engine.backends import SamplingParams  # noqa: E402
from engine.backends.transformers_backend import TransformersBackend  # noqa: E402

# A prompt that invites a long answer, so most rows run to max_new_tokens.
STORY = [{"role": "user", "content": "Write a long, detailed story about a lighthouse keeper and a storm."}]


@dataclass(frozen=True)
class ThroughputResult:
    """Decoding speed at one batch size; tokens/s counts generated tokens of all rows."""

    batch_size: int
    backend_tokens_per_s: float
    backend_mean_tokens_per_row: float
    reference_tokens_per_s: float


@dataclass(frozen=True)
class LoadResult:
    """Seconds to load the model: from GGUF, from the cache, and a fresh process from the cache."""

    from_gguf_s: float
    from_cache_s: float
    cold_process_from_cache_s: float


def measure_loads(*, cache_root: Path) -> tuple[LoadResult, TransformersBackend]:
    """Load from GGUF into an empty `cache_root`, then from the cache; returns the timings and backend."""
    first = TransformersBackend(device="cpu", cache_root=cache_root)
    assert first.load_report.source == "gguf", first.load_report
    second = TransformersBackend(device="cpu", cache_root=cache_root)
    assert second.load_report.source == "cache", second.load_report
    cold_start = (
        "import time; started = time.perf_counter();"
        "from pathlib import Path;"
        "from engine.backends.transformers_backend import TransformersBackend;"
        f"TransformersBackend(device='cpu', cache_root=Path({str(cache_root)!r}));"
        "print(time.perf_counter() - started)"
    )
    completed = subprocess.run(
        [sys.executable, "-c", cold_start],
        cwd=REPOSITORY_ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    cold_seconds = float(completed.stdout.strip().splitlines()[-1])
    return (
        LoadResult(
            from_gguf_s=first.load_report.seconds,
            from_cache_s=second.load_report.seconds,
            cold_process_from_cache_s=cold_seconds,
        ),
        second,
    )


def measure_throughput(
    *, backend: TransformersBackend, batch_size: int, new_tokens: int, repeats: int
) -> ThroughputResult:
    """Median tokens/s over `repeats` runs of the backend and of transformers' own `generate`."""
    params = SamplingParams(temperature=1.0, top_p=0.95, max_new_tokens=new_tokens)
    # Warm up at the full length: the CPU kernels are set up per shape, and the cache grows each step.
    backend.generate(messages=STORY, seeds=[10**6 + row for row in range(batch_size)], params=params)
    backend_rates: list[float] = []
    tokens_per_row: list[float] = []
    for repeat in range(repeats):
        seeds = [repeat * 1000 + row for row in range(batch_size)]
        started = time.perf_counter()
        generations = backend.generate(messages=STORY, seeds=seeds, params=params)
        elapsed = time.perf_counter() - started
        generated = sum(generation.output_tokens or 0 for generation in generations)
        backend_rates.append(generated / elapsed)
        tokens_per_row.append(generated / batch_size)

    prompt = torch.tensor([backend.prompt_token_ids(messages=STORY)] * batch_size)
    reference_rates: list[float] = []
    with torch.inference_mode():
        for repeat in range(-1, repeats):  # run -1 warms up and is not counted
            torch.manual_seed(repeat)
            started = time.perf_counter()
            output = backend._model.generate(
                prompt,
                attention_mask=torch.ones_like(prompt),
                do_sample=True,
                temperature=1.0,
                top_p=0.95,
                top_k=0,
                max_new_tokens=new_tokens,
                min_new_tokens=new_tokens,  # every row runs the full length: an upper bound on work
            )
            elapsed = time.perf_counter() - started
            if repeat >= 0:
                reference_rates.append((output.shape[1] - prompt.shape[1]) * batch_size / elapsed)
    return ThroughputResult(
        batch_size=batch_size,
        backend_tokens_per_s=statistics.median(backend_rates),
        backend_mean_tokens_per_row=statistics.mean(tokens_per_row),
        reference_tokens_per_s=statistics.median(reference_rates),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a Markdown table")
    arguments = parser.parse_args()

    import transformers  # imported before timing so the load figures are about the model files

    with tempfile.TemporaryDirectory(prefix="passband-bench-models-") as cache_root:
        loads, backend = measure_loads(cache_root=Path(cache_root))
        results = [
            measure_throughput(
                backend=backend, batch_size=batch_size, new_tokens=arguments.new_tokens, repeats=arguments.repeats
            )
            for batch_size in arguments.batch_sizes
        ]

    environment = {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "cpu_threads": torch.get_num_threads(),
        "cpus": os.cpu_count(),
        "new_tokens": arguments.new_tokens,
        "repeats": arguments.repeats,
    }
    if arguments.json:
        print(
            json.dumps({"environment": environment, "load": asdict(loads), "throughput": [asdict(r) for r in results]})
        )
        return
    print(f"environment: {environment}")
    print()
    print("| load | seconds |")
    print("|---|---:|")
    print(f"| from GGUF (dequantise, convert, write cache) | {loads.from_gguf_s:.1f} |")
    print(f"| from the safetensors cache (same process) | {loads.from_cache_s:.1f} |")
    print(f"| fresh process, imports + load from cache | {loads.cold_process_from_cache_s:.1f} |")
    print()
    print("| batch | backend tokens/s | tokens per row (of max) | transformers generate tokens/s |")
    print("|---:|---:|---:|---:|")
    for result in results:
        print(
            f"| {result.batch_size} | {result.backend_tokens_per_s:.0f} | "
            f"{result.backend_mean_tokens_per_row:.1f} / {arguments.new_tokens} | {result.reference_tokens_per_s:.0f} |"
        )


if __name__ == "__main__":
    main()
