"""A ready release as a Hugging Face Hub dataset folder, pushable as it is.

    <folder>/README.md              dataset card: YAML metadata (configs, license, tags, size) and the
                                    calibration story (probe model, thresholds, counts per band)
    <folder>/<format>/train-<sha>.parquet  one config per trainer format (native, trl, verifiers,
                                    nemo_gym); <sha>: the first 16 hex digits of the file's sha256
    <folder>/manifest.json          the release's manifest (filter, thresholds, files and their sha256)
    <folder>/quality_card.schema.json  the JSON Schema of the `quality_card` every row carries

`datasets.load_dataset(folder, "<format>")` reads the card's `configs` and loads that format's file.
`datasets` keys its cache by the folder's name and the data files' paths as the card writes them, not
by their content: with a plain `train.parquet`, two folders named alike (release-1-hub from two
databases, or a rebuilt release) would share one cache entry and the second would load the first's
rows. The content digest in each file name makes the entry the release's own.
`hf upload ORG/NAME <folder> . --repo-type dataset` pushes it (a token and the network: not done here).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import yaml

from curation import files
from engine import formats, quality_card
from releases.errors import ReleaseError
from releases.folders import new_folder
from releases.models import Release, ReleaseStatus
from releases.services import release_file_name

# Tags the Hub lists reinforcement-learning environments and their libraries under.
HUB_TAGS = ("rl-environment", "reinforcement-learning", "passband", "trl", "verifiers", "nemo-gym", "grpo")
SPLIT = "train"


def release_hub_folder(*, release: Release, folder: Path, license: str = "other") -> Path:
    """Write `release` as a Hub dataset folder at `folder` (which must not exist yet, or be empty);
    returns it. ReleaseError when the release is not ready, is empty (the Hub's loader refuses a split
    without rows) or its files are missing. Written beside `folder` first and renamed into place."""
    if release.status != ReleaseStatus.READY:
        raise ReleaseError(f"Release {release.pk} is {release.status}, not ready: build it first.")
    manifest = release.manifest or {}
    if not manifest.get("tasks"):
        raise ReleaseError(f"Release {release.pk} holds no task: the Hub's loader refuses a split without rows.")
    data_files: dict[str, str] = {}
    with new_folder(folder, what="dataset") as staging:
        for format in formats.names():
            stored = release_file_name(release=release, format=format, file_type="parquet")
            (staging / format).mkdir()
            try:
                # From the storage: this machine's disk, or a copy of the object store's file.
                with files.stored_file_local(stored) as source:
                    digest = _sha256(Path(source))
                    data_files[format] = f"{format}/{SPLIT}-{digest[:16]}.parquet"
                    shutil.copyfile(source, staging / data_files[format])
            except FileNotFoundError:
                raise ReleaseError(f"Release {release.pk} has no file {format}.parquet in storage.") from None
        (staging / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        shutil.copyfile(quality_card.SCHEMA_PATH, staging / quality_card.SCHEMA_PATH.name)
        (staging / "README.md").write_text(dataset_card(release=release, license=license, data_files=data_files))
    return Path(folder)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def dataset_card(*, release: Release, license: str, data_files: dict[str, str]) -> str:
    """The README.md of the Hub folder: YAML metadata the Hub and `datasets` read, then the story.
    `data_files`: each format's parquet path in the folder."""
    manifest = release.manifest
    tasks = int(manifest["tasks"])
    metadata = _card_metadata(release=release, license=license, data_files=data_files, tasks=tasks)
    probe_model = manifest.get("probe_model", {})
    bands = "\n".join(f"| {band} | {count} |" for band, count in sorted(manifest.get("bands", {}).items()))
    domains = ", ".join(
        f"{domain or 'unset'} ({count})" for domain, count in sorted(manifest.get("domains", {}).items())
    )
    thresholds = "\n".join(
        f"| {environment} | {values.get('floor')} | {values.get('retire_at')} |"
        for environment, values in sorted((release.thresholds or {}).items())
    )
    configs = "\n".join(f"| `{format.name}` | {format.description} |" for format in formats.all_formats())
    warnings = "".join(f"\n> **Warning.** {warning}\n" for warning in manifest.get("warnings", []))
    model_line = ", ".join(f"{key} `{value}`" for key, value in probe_model.items() if value)
    body = f"""
# {metadata["pretty_name"]}

{tasks} reinforcement-learning tasks with verifiers, curated and calibrated with
Passband: each task was attempted several times by a probe model, every attempt was
scored by the task's own verifier, and the pass rate decides its band. Tasks whose pass rate lies between
the environment's floor and its retirement threshold are *in band*: the model sometimes solves them and
sometimes does not, so GRPO-style training learns from them.
{warnings}
## Configs

One config per trainer format, split `{SPLIT}`: `datasets.load_dataset("<this repo>", "<config>")`.

| config | what a row holds |
|---|---|
{configs}

Every row carries `task_key`, `version_hash` (the exact task version) and `calibration` (probe model,
attempts, successes, pass rate, interval, band, whether the band was predicted for a checkpoint rather
than probed (`band_predicted`), GRPO signal).

{quality_cards_section(manifest.get("quality_cards"))}
## Counts per band

| band | tasks |
|---|---|
{bands}

Domains: {domains or "none"}.

## How it was calibrated

- Probe model: {model_line or "unknown"}.
- Filter: {json.dumps(release.filter, sort_keys=True)}.
- Pass rates carry an exact Beta-posterior interval (Jeffreys, or the environment's fitted prior); the
  band is decided by Passband's stopping rule once the interval clears a threshold, never by a normal
  approximation.

| environment | floor | retire at |
|---|---|---|
{thresholds}

A reward comes from the task's verifier (`engine.verifiers.verify` in the `passband` package: the very
code that calibrated it). A verifier error or timeout is no reward (null), never 0.

## Files

`manifest.json` is the release's manifest: filter, thresholds, counts, and each file's row count and sha256.
"""
    return "---\n" + yaml.safe_dump(metadata, sort_keys=False, allow_unicode=True) + "---\n" + body


def _card_metadata(*, release: Release, license: str, data_files: dict[str, str], tasks: int) -> dict:
    """The dataset card's YAML metadata: name, license, tags, size and one config per registered format."""
    return {
        "pretty_name": f"Passband release {release.pk}"
        + (f": {release.environment.name}" if release.environment else ""),
        "license": license,
        "tags": list(HUB_TAGS),
        "task_categories": ["text-generation"],
        "size_categories": [_size_category(tasks)],
        "configs": [
            {
                "config_name": format.name,
                "data_files": [{"split": SPLIT, "path": data_files[format.name]}],
                **({"default": True} if format.hub_default else {}),
            }
            for format in formats.all_formats()
        ],
    }


def _size_category(rows: int) -> str:
    """The Hub's size category for a row count."""
    for limit, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")):
        if rows < limit:
            return label
    return "1M<n<10M"


def quality_cards_section(summary: dict | None) -> str:
    """The dataset card's account of the rows' quality cards, from the manifest's summary of them."""
    if not summary:
        return ""

    def counts(name: str) -> str:
        return ", ".join(f"{key} {value}" for key, value in sorted(summary.get(name, {}).items())) or "none"

    agreement = summary["review_agreement"]
    share = f"{agreement['share']:.0%}" if agreement["share"] is not None else "no second reviews"
    return f"""## Quality cards

Every row's `quality_card` column is its task version's quality card (JSON text; schema
`quality_card.schema.json` in this folder, `$id` {summary["schema"]}): pass rate, interval and band per probe
model and checkpoint with the rule that decided it, verifier kind and version, audit, gameability and tamper
results, similarity and contamination, review decisions, costs and provenance. Filter on it without Passband:
`json.loads(row["quality_card"])`.

- Verifier kinds: {counts("verifier_kinds")}.
- Reference audit: {counts("audit")}. Gameability: {counts("gameability")}.
- Impossible variants: {counts("impossible_variants")}. Weak tests: {counts("weak_tests")}.
- Tasks with open near-duplicate flags: {summary["open_near_duplicates"]}; with open contamination flags:
  {summary["open_contamination"]}; with tampered rollouts: {summary["with_tampered_rollouts"]}.
- Review agreement: {agreement["agreed"]} of {agreement["second_reviews"]} second reviews ({share}).
- Cost: ${summary["cost_usd"]["authoring"]} authoring, ${summary["cost_usd"]["probing"]} probing.
"""
