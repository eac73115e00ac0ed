"""A release's `trl` file feeds TRL's GRPOTrainer: one training step on the CPU, rewarded by Passband's verifier.

The model is tiny and randomly initialised; the tokenizer is SmolLM2's, read from the files the
transformers backend already has on disk (no download: HF_HUB_OFFLINE=1).
"""

import pytest

from releases import services as releases
from tests.releases.export_data import calibrated_environment

pytestmark = pytest.mark.django_db

trl = pytest.importorskip("trl")


def smollm2_tokenizer():
    from transformers import AutoTokenizer

    from engine.backends import model_store

    converted = sorted(model_store.model_cache_root().glob(f"{model_store.DEFAULT_MODEL_NAME}-*"))
    if converted:
        return AutoTokenizer.from_pretrained(converted[0])
    gguf = model_store.default_gguf_path()
    return AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)


def passband_reward(prompts, completions, **columns):
    """The shipped TRL reward function (the README's), recording what GRPOTrainer gave it."""
    from engine.integrations.trl_reward import passband_reward as shipped

    rewards = shipped(prompts, completions, **columns)  # None for an error or timeout: left out of the mean
    passband_reward.calls.append({"rewards": rewards, "task_keys": list(columns["task_key"]), "prompts": prompts})
    return rewards


def test_trl_export_trains_one_grpo_step(arithmetic, alice, tmp_path, settings, django_capture_on_commit_callbacks):
    import torch
    from datasets import load_dataset
    from transformers import LlamaConfig, LlamaForCausalLM

    # A real release, as a trainer downloads it: approved, in band, built by the app.
    settings.MEDIA_ROOT = tmp_path / "media"
    model = calibrated_environment(arithmetic, alice)
    with django_capture_on_commit_callbacks(execute=False):  # built here rather than on a worker
        release = releases.release_create(user=alice, probe_model=model, environment=arithmetic)
    release = releases.release_build(release_id=release.pk)
    assert release.status == "ready" and release.manifest["files"]["trl.parquet"]["rows"] == 2
    path = releases.release_directory(release=release) / "trl.parquet"
    dataset = load_dataset("parquet", data_files=str(path), split="train", cache_dir=str(tmp_path / "cache"))

    # The reward function passes the reference answer and fails a wrong one, on the exported rows.
    row = dataset[0]
    passband_reward.calls = []
    assert passband_reward(
        prompts=[row["prompt"]] * 2,
        completions=[[{"role": "assistant", "content": row["answer"]}], [{"role": "assistant", "content": "no idea"}]],
        answer=[row["answer"]] * 2,
        verifier=[row["verifier"]] * 2,
        task_key=[row["task_key"]] * 2,
    ) == [1.0, 0.0]

    tokenizer = smollm2_tokenizer()
    torch.manual_seed(0)
    tiny = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=len(tokenizer),
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=2,
            max_position_embeddings=512,
            pad_token_id=tokenizer.pad_token_id,
            eos_token_id=tokenizer.eos_token_id,
            bos_token_id=tokenizer.bos_token_id,
        )
    )
    config = trl.GRPOConfig(
        output_dir=str(tmp_path / "grpo"),
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=8,
        max_steps=1,
        use_cpu=True,
        report_to=[],
        save_strategy="no",
        logging_steps=1,
        bf16=False,
        seed=0,
    )
    passband_reward.calls = []
    trainer = trl.GRPOTrainer(
        model=tiny, reward_funcs=passband_reward, args=config, train_dataset=dataset, processing_class=tokenizer
    )
    result = trainer.train()

    assert result.global_step == 1
    assert passband_reward.calls, "GRPOTrainer never called the reward function"
    graded = passband_reward.calls[0]
    assert len(graded["rewards"]) == 4 and set(graded["task_keys"]) <= {"sum", "product"}
    assert all(reward in (0.0, 1.0, None) for reward in graded["rewards"])
    # TRL hands the reward function each row's prompt, which the verifier reads as calibration does.
    questions = {"sum": "What is 2 + 3?", "product": "What is 91 * 17?"}
    for key, prompt in zip(graded["task_keys"], graded["prompts"], strict=True):
        assert prompt[-1]["content"].endswith(questions[key])
