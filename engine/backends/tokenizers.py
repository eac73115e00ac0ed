"""Token ids back to the text each token stands for, for people reading rollouts.

Display only: capture never re-tokenises (the ids stored are the backend's own). A tokenizer is
found on this machine or not at all: the embedded model's (its converted copy, else its GGUF file),
a model folder, or a Hugging Face model id already in the local cache; nothing is downloaded.
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path

logger = logging.getLogger(__name__)


class _FastTokenizer:
    """A `tokenizer.json` read by the `tokenizers` library alone: a page's first load need not import
    transformers and torch (seconds) to show token pieces."""

    def __init__(self, path: Path):
        from tokenizers import Tokenizer

        self._tokenizer = Tokenizer.from_file(str(path))

    def pieces(self, ids: list[int]) -> list[str]:
        return [self._tokenizer.decode([token_id], skip_special_tokens=False) for token_id in ids]


class _TransformersTokenizer:
    def __init__(self, tokenizer):
        self._tokenizer = tokenizer

    def pieces(self, ids: list[int]) -> list[str]:
        vocabulary = self._tokenizer.convert_ids_to_tokens(ids)
        return [self._tokenizer.convert_tokens_to_string([piece]) if piece is not None else "" for piece in vocabulary]


@functools.lru_cache(maxsize=8)
def _tokenizer(kind: str, model: str):
    try:
        return _find_tokenizer(kind, model)
    except Exception as error:  # no tokenizer on this machine: the page shows ids instead
        logger.info("no local tokenizer for %s model %r: %s", kind, model, error)
    return None


def _find_tokenizer(kind: str, model: str):
    from engine.backends.model_store import DEFAULT_MODEL_NAME, converted_model_dir, default_gguf_path

    if kind == "transformers" and model in ("", DEFAULT_MODEL_NAME):
        gguf = default_gguf_path()
        converted = converted_model_dir(name=DEFAULT_MODEL_NAME, source=gguf)
        if (converted / "tokenizer.json").is_file():
            return _FastTokenizer(converted / "tokenizer.json")
        return _auto_tokenizer(gguf.parent, gguf_file=gguf.name)
    path = Path(model).expanduser()
    if path.is_file() and path.suffix == ".gguf":
        return _auto_tokenizer(path.parent, gguf_file=path.name)
    if (path / "tokenizer.json").is_file():
        return _FastTokenizer(path / "tokenizer.json")
    if model:
        return _auto_tokenizer(model)
    return None


def _auto_tokenizer(source, **options) -> _TransformersTokenizer:
    from transformers import AutoTokenizer

    return _TransformersTokenizer(AutoTokenizer.from_pretrained(source, local_files_only=True, **options))


def token_pieces(*, kind: str, model: str, ids: list[int]) -> list[str] | None:
    """The text of each token of `ids` under the tokenizer of a probe model (`kind` is its backend,
    `model` its model setting), or None when no tokenizer for it is on this machine.

    Each token is decoded on its own, so a character split across tokens (some UTF-8 bytes) shows
    as a replacement character in each part; the rollout's text is the backend's exact decoding.
    """
    tokenizer = _tokenizer(kind, model)
    if tokenizer is None:
        return None
    try:
        return tokenizer.pieces([int(token_id) for token_id in ids])
    except Exception as error:
        logger.info("could not decode tokens of %s model %r: %s", kind, model, error)
        return None
