"""Tasks from reasoning-gym's procedural generators, and sweeps along its curricula.

reasoning-gym (PyPI ``reasoning-gym``) generates questions from a generator name, a config and a seed,
and scores answers with the generator's own ``score_answer``. Here each generated entry becomes a task
in Passband's format, scored by the ``reasoning_gym`` verifier kind (engine/verifiers/kinds/reasoning_gym.py):

    tasks = generated_tasks("basic_arithmetic", config={"min_terms": 2, "max_terms": 3}, seed=0, size=50)
    tasks = curriculum_tasks("basic_arithmetic", size_per_level=20, seed=0)   # one attribute at a time

A sweep walks each attribute of the generator's curriculum through its levels (the other attributes at
their default level), reasoning-gym's UPPER_BOUND mode: a level is that level's value alone, not every
value up to it, so a pass rate per level says which settings land in band. Every task records where it
came from in ``metadata["reasoning_gym"]``: generator, config, seed, index and, in a sweep, the
attribute, level and value (what ``curriculum_report`` groups by).

Nothing here imports Django; keys are ``<generator>/<config hash>/<seed>-<index>``, so importing the
same sweep again is a no-op and a new config never collides with an old one.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

SYSTEM_PROMPT_STYLE = "default"  # reasoning_gym.utils.SYSTEM_PROMPTS: asks for <answer>...</answer>
_NOT_CONFIG = ("seed", "size")


class GeneratorError(ValueError):
    """An unknown generator, a config it refuses, or entries it cannot score; the message says which."""


def _json_ready(value: Any) -> Any:
    """Tuples as lists, anything else JSON cannot hold as its text: what the task row will store."""
    return json.loads(json.dumps(value, default=str))


def _config_hash(config: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:10]


def generator_names() -> list[str]:
    from reasoning_gym.factory import DATASETS

    return sorted(DATASETS)


def _dataset(name: str, config: Mapping[str, Any], *, seed: int, size: int):
    import reasoning_gym
    from reasoning_gym.factory import DATASETS

    if name not in DATASETS:
        raise GeneratorError(
            f"unknown reasoning-gym generator {name!r}; known: {', '.join(sorted(DATASETS)[:12])}, ..."
        )
    try:
        return reasoning_gym.create_dataset(name, seed=seed, size=size, **dict(config))
    except (TypeError, ValueError, AssertionError) as error:
        raise GeneratorError(f"generator {name!r} refused config {dict(config)}: {error}") from error


def _system_prompt() -> str:
    from reasoning_gym.utils import SYSTEM_PROMPTS

    return SYSTEM_PROMPTS[SYSTEM_PROMPT_STYLE]


def entry_task(name: str, entry: Mapping[str, Any], *, key: str, origin: Mapping[str, Any]) -> dict[str, Any]:
    """One generated entry as a task row in Passband's format."""
    return {
        "key": key,
        "prompt": [
            {"role": "system", "content": _system_prompt()},
            {"role": "user", "content": str(entry["question"])},
        ],
        "answer": str(entry["answer"]),
        "verifier": {"kind": "reasoning_gym", "dataset": name, "metadata": _json_ready(entry.get("metadata") or {})},
        "domain": "reasoning",
        "metadata": {"reasoning_gym": _json_ready(dict(origin))},
    }


def generated_tasks(
    name: str,
    *,
    config: Mapping[str, Any] | None = None,
    seed: int = 0,
    size: int = 10,
    sweep: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """`size` tasks from generator `name` with `config` (the generator's config fields, without seed and
    size) and `seed`. `sweep`, when given, is recorded with each task in ``sweeps`` (attribute, level, value)."""
    if size < 1:
        raise GeneratorError(f"size must be at least 1, got {size}")
    config = {field: value for field, value in (config or {}).items() if field not in _NOT_CONFIG}
    dataset = _dataset(name, config, seed=seed, size=size)
    full_config = _json_ready({k: v for k, v in dataclasses.asdict(dataset.config).items() if k not in _NOT_CONFIG})
    digest = _config_hash(full_config)
    tasks = []
    for index in range(size):
        entry = dataset[index]
        origin: dict[str, Any] = {"generator": name, "config": full_config, "seed": seed, "index": index}
        if sweep is not None:
            origin["sweeps"] = [dict(sweep)]
        tasks.append(entry_task(name, entry, key=f"{name}/{digest}/{seed}-{index}", origin=origin))
    return tasks


def curriculum_levels(name: str, attributes: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """The sweep's points: one per (attribute, level), each with the generator config it stands for."""
    from reasoning_gym.coaching.base_curriculum import DefaultCurriculumContext, RangeAttributeMode
    from reasoning_gym.factory import create_curriculum, has_curriculum

    if not has_curriculum(name):
        raise GeneratorError(f"reasoning-gym generator {name!r} has no curriculum: import it with a config instead")
    curriculum = create_curriculum(name)
    known = dict(curriculum.attributes)
    chosen = list(attributes) if attributes else list(known)
    unknown = [attribute for attribute in chosen if attribute not in known]
    if unknown:
        raise GeneratorError(f"{name}'s curriculum has no attribute {unknown[0]!r}; it has: {', '.join(known)}")
    context = DefaultCurriculumContext(mode=RangeAttributeMode.UPPER_BOUND)
    points = []
    for attribute in chosen:
        for level, value in enumerate(known[attribute].levels):
            curriculum = create_curriculum(name)  # every other attribute at its default level
            curriculum.set_attr_level(attribute, level)
            config = dataclasses.asdict(curriculum.generate_configuration({"seed": 0, "size": 1}, context=context))
            points.append(
                {
                    "attribute": attribute,
                    "level": level,
                    "value": _json_ready(value),
                    "config": {k: v for k, v in config.items() if k not in _NOT_CONFIG},
                }
            )
    return points


def curriculum_tasks(
    name: str, *, size_per_level: int = 10, seed: int = 0, attributes: Iterable[str] | None = None
) -> list[dict[str, Any]]:
    """Tasks along the generator's curriculum: `size_per_level` for each (attribute, level)."""
    tasks: dict[str, dict[str, Any]] = {}
    for point in curriculum_levels(name, attributes):
        sweep = {"attribute": point["attribute"], "level": point["level"], "value": point["value"]}
        for task in generated_tasks(name, config=point["config"], seed=seed, size=size_per_level, sweep=sweep):
            if task["key"] in tasks:
                # Every attribute at its default level is one config: one task, on each attribute's sweep.
                tasks[task["key"]]["metadata"]["reasoning_gym"]["sweeps"].append(sweep)
            else:
                tasks[task["key"]] = task
    return list(tasks.values())


def curriculum_report(rows: Iterable[tuple[Mapping[str, Any], int, int, str | None]]) -> list[dict[str, Any]]:
    """Pass rate per sweep point. In: (task metadata, successes, attempts, band or None) per task.
    Out: one row per (generator, attribute, level): value, tasks, probed tasks, pooled successes and
    attempts, pass rate (None before any attempt), and tasks per band, in sweep order."""
    groups: dict[tuple, dict[str, Any]] = {}
    for metadata, successes, attempts, band in rows:
        origin = (metadata or {}).get("reasoning_gym") or {}
        for sweep in origin.get("sweeps") or []:
            _count(groups, origin.get("generator"), sweep, successes, attempts, band)
    report = [groups[key] for key in sorted(groups, key=lambda key: (str(key[0]), str(key[1]), key[2]))]
    for group in report:
        group["pass_rate"] = group["successes"] / group["attempts"] if group["attempts"] else None
    return report


def _count(groups: dict, generator: Any, sweep: Mapping[str, Any], successes: int, attempts: int, band: str | None):
    key = (generator, sweep["attribute"], sweep["level"])
    group = groups.setdefault(
        key,
        {
            "generator": key[0],
            "attribute": key[1],
            "level": key[2],
            "value": sweep.get("value"),
            "tasks": 0,
            "probed": 0,
            "successes": 0,
            "attempts": 0,
            "bands": {},
        },
    )
    group["tasks"] += 1
    if attempts:
        group["probed"] += 1
        group["successes"] += successes
        group["attempts"] += attempts
    if band:
        group["bands"][band] = group["bands"].get(band, 0) + 1
