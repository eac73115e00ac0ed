"""OpenEnv: a real release served by OpenEnv's app, driven through OpenEnv's own clients."""

import asyncio

import pytest

from tests.engine.integrations.conftest import serve_app

pytestmark = pytest.mark.django_db

pytest.importorskip("openenv.core")


def test_openenv_client_resets_to_a_task_and_steps_score_it(release_dir):
    from openenv import GenericEnvClient

    from engine.integrations.openenv_env import PassbandAction, PassbandEnvClient, create_passband_app

    async def episodes(base_url):
        async with PassbandEnvClient(base_url=base_url) as env:
            first = await env.reset(seed=0)
            again = await env.reset(seed=4)  # seed mod 4 tasks: the same task version
            assert first.observation.task_id == again.observation.task_id
            assert first.done is False and first.reward is None and first.observation.prompt

            reset = await env.reset(task_id="product")
            assert reset.observation.task_id.startswith("product@")
            assert reset.observation.prompt[-1]["content"].endswith("What is 91 * 17?")
            right = await env.step(PassbandAction(completion=[{"role": "assistant", "content": "\\boxed{1547}"}]))
            state = await env.state()

            await env.reset(task_id="product")
            wrong = await env.step(PassbandAction(completion="1548"))

            tool = await env.reset(task_id="tool-add")
            assert tool.observation.tools[0]["function"]["name"] == "add"
        # OpenEnv's untyped client speaks the same protocol.
        async with GenericEnvClient(base_url=base_url) as env:
            capital = await env.reset(task_id="capital")
            paris = await env.step({"completion": "PARIS"})
        return right, state, wrong, capital, paris

    with serve_app(create_passband_app(release_dir / "native.parquet")) as base_url:
        right, state, wrong, capital, paris = asyncio.run(episodes(base_url))

    assert (right.reward, right.done, right.observation.outcome) == (1.0, True, "pass")
    assert state.task_id.startswith("product@") and state.step_count == 1
    assert (wrong.reward, wrong.done, wrong.observation.outcome) == (0.0, True, "fail")
    assert capital.observation["task_id"].startswith("capital@")
    assert (paris.reward, paris.done, paris.observation["outcome"]) == (1.0, True, "pass")
