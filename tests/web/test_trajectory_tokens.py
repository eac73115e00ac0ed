"""The trajectory viewer shows each token's text, shaded by its logprob; ids only without a tokenizer."""

import pytest
from django.urls import reverse

from calibration.models import Campaign, ProbeModel, Rollout
from engine.backends.tokenizers import token_pieces
from engine.packing import pack_logprobs, pack_tokens
from tests.factories import import_tasks, math_task

pytestmark = pytest.mark.django_db

# SmolLM2's ids for "The answer is 42, café." (the embedded model's tokenizer).
IDS = [504, 2988, 314, 216, 36, 34, 28, 37366, 30]


def test_the_embedded_models_tokens_decode_to_their_text():
    assert token_pieces(kind="transformers", model="", ids=IDS) == [
        "The",
        " answer",
        " is",
        " ",
        "4",
        "2",
        ",",
        " café",
        ".",
    ]
    assert token_pieces(kind="openai", model="no-such/model-anywhere", ids=IDS) is None


def rollout_of(environment, user, probe_model):
    import_tasks(environment, user, math_task("t"))
    campaign = Campaign.objects.create(environment=environment, probe_model=probe_model, created_by=user, seed=1)
    return Rollout.objects.create(
        campaign=campaign,
        task_version=environment.tasks.get().current_version,
        probe_model=probe_model,
        sample_index=0,
        seed=1,
        text="The answer is 42, café.",
        completion_token_ids=pack_tokens(IDS),
        logprobs=pack_logprobs([-0.01, -0.2, -0.1, -3.0, -0.5, -0.5, -1.0, -2.0, -0.05]),
        outcome="pass",
    )


def test_the_viewer_shows_token_text_with_shading(client, alice, arithmetic):
    rollout_of(arithmetic, alice, ProbeModel.objects.create(name="smollm2", backend="transformers"))
    client.force_login(alice)
    page = client.get(reverse("trajectory_list"), {"environment": "arithmetic"}).content.decode()
    assert 'title="id 2988 · logprob -0.200 · p 0.819"> answer</span>' in page
    assert 'class="token dark" style="--shade: 95%" title="id 216 · logprob -3.000 · p 0.050"> </span>' in page
    assert "> café</span>" in page


def test_without_a_tokenizer_the_viewer_shows_ids(client, alice, arithmetic):
    rollout_of(
        arithmetic, alice, ProbeModel.objects.create(name="remote", backend="openai", model="no-such/model-anywhere")
    )
    client.force_login(alice)
    page = client.get(reverse("trajectory_list"), {"environment": "arithmetic"}).content.decode()
    assert 'title="id 2988 · logprob -0.200 · p 0.819">2988</span>' in page
