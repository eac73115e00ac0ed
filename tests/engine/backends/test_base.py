"""The interface: seeds, sampling parameters, and the per-process backend registry."""

import pytest

import engine.backends as backends
from engine.backends import BackendOptions, Generation, SamplingParams, backend_for, rollout_seed
from tests.support.openai_server import serve_openai


def test_rollout_seed_is_stable_across_processes():
    # Pinned: a change here would silently re-seed every campaign.
    assert rollout_seed(campaign_seed=7, task_version_hash="abc123", sample_index=0) == rollout_seed(
        campaign_seed=7, task_version_hash="abc123", sample_index=0
    )
    assert rollout_seed(campaign_seed=7, task_version_hash="abc123", sample_index=0) == 3259725185550618187


def test_rollout_seeds_of_one_task_never_repeat_and_run_consecutively():
    seeds = [rollout_seed(campaign_seed=1, task_version_hash="f" * 64, sample_index=index) for index in range(20_000)]
    assert len(set(seeds)) == len(seeds)
    # Consecutive, so one vLLM request (seed s, n samples) reproduces the seeds s, s + 1, ...
    assert all(later == earlier + 1 for earlier, later in zip(seeds, seeds[1:]))
    last = rollout_seed(campaign_seed=1, task_version_hash="f" * 64, sample_index=2**31 - 1)
    assert all(0 <= seed < 2**63 for seed in [*seeds, last])


def test_rollout_seed_depends_on_campaign_and_task_version():
    base = rollout_seed(campaign_seed=1, task_version_hash="aaa", sample_index=3)
    assert rollout_seed(campaign_seed=2, task_version_hash="aaa", sample_index=3) != base
    assert rollout_seed(campaign_seed=1, task_version_hash="aab", sample_index=3) != base
    # The fields are separated, so moving a digit between them changes the seed.
    assert rollout_seed(campaign_seed=11, task_version_hash="1", sample_index=3) != rollout_seed(
        campaign_seed=1, task_version_hash="11", sample_index=3
    )


def test_rollout_seed_rejects_a_negative_index():
    with pytest.raises(ValueError, match="sample_index"):
        rollout_seed(campaign_seed=1, task_version_hash="a", sample_index=-1)
    with pytest.raises(ValueError, match="sample_index"):
        rollout_seed(campaign_seed=1, task_version_hash="a", sample_index=2**31)


def test_sampling_params_validate_and_freeze_stop_strings():
    params = SamplingParams(stop=["\n\n", "END"])  # a list, as it comes from JSON
    assert params.stop == ("\n\n", "END")
    hash(params)
    for bad in ({"temperature": -0.1}, {"top_p": 0.0}, {"top_p": 1.5}, {"max_new_tokens": 0}, {"stop": ("",)}):
        with pytest.raises(ValueError):
            SamplingParams(**bad)


def test_failed_generation_is_an_error_without_tokens():
    generation = Generation.failed(seed=5, error="boom")
    assert generation.finish_reason == "error"
    assert generation.error == "boom"
    assert generation.completion_token_ids is None and generation.logprobs is None


def test_backend_for_rejects_unknown_kinds_and_missing_settings():
    with pytest.raises(ValueError, match="unknown backend kind"):
        backend_for(BackendOptions(kind="llamafile"))
    with pytest.raises(ValueError, match="base_url"):
        backend_for(BackendOptions(kind="openai", model="m"))


def test_backend_for_keeps_one_backend_per_configuration():
    with serve_openai() as base_url:
        try:
            first = backend_for(BackendOptions(kind="openai", model="fake-model", base_url=base_url))
            assert backend_for(BackendOptions(kind="openai", model="fake-model", base_url=base_url)) is first
            other = backend_for(
                BackendOptions(kind="openai", model="fake-model", base_url=base_url, endpoint="completions")
            )
            assert other is not first
            assert first.name == "openai" and first.model == "fake-model"
        finally:
            backends.backends_clear()


def test_backend_for_starts_afresh_in_a_forked_child(monkeypatch):
    with serve_openai() as base_url:
        try:
            parent = backend_for(BackendOptions(kind="openai", model="fake-model", base_url=base_url))
            # What a prefork worker sees: the registry was filled by another process id.
            monkeypatch.setattr(backends, "_backends_pid", -1)
            child = backend_for(BackendOptions(kind="openai", model="fake-model", base_url=base_url))
            assert child is not parent
        finally:
            backends.backends_clear()
