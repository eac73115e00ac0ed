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


@functools.lru_cache(maxsize=8)
def _tokenizer(kind: str, model: str):
    from transformers import AutoTokenizer

    from engine.backends.model_store import DEFAULT_MODEL_NAME, converted_model_dir, default_gguf_path

    try:
        if kind == "transformers" and model in ("", DEFAULT_MODEL_NAME):
            gguf = default_gguf_path()
            converted = converted_model_dir(name=DEFAULT_MODEL_NAME, source=gguf)
            if converted.is_dir():
                return AutoTokenizer.from_pretrained(converted, local_files_only=True)
            return AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name, local_files_only=True)
        path = Path(model).expanduser()
        if path.is_file() and path.suffix == ".gguf":
            return AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name, local_files_only=True)
        if model:
            return AutoTokenizer.from_pretrained(model, local_files_only=True)
    except Exception as error:  # no tokenizer on this machine: the page shows ids instead
        logger.info("no local tokenizer for %s model %r: %s", kind, model, error)
    return None


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
        vocabulary = tokenizer.convert_ids_to_tokens([int(token_id) for token_id in ids])
        return [tokenizer.convert_tokens_to_string([piece]) if piece is not None else "" for piece in vocabulary]
    except Exception as error:
        logger.info("could not decode tokens of %s model %r: %s", kind, model, error)
        return None
