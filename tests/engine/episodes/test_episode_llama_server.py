"""Back-office episodes through the real llama.cpp server: the tools reach the model in text mode
(SmolLM2's GGUF template renders no `tools`), the call it writes is parsed and run, and the server
sees the observation in the next turn's conversation."""

import json

import httpx
import pytest

from engine.backends import SamplingParams
from engine.backends.openai_backend import OpenAIBackend
from engine.episodes import backoffice
from engine.episodes.runner import EpisodeLimits, run_episode
from tests.support.llama_server import completion_text

pytestmark = [pytest.mark.server]

CALL = '<tool_call>{"name": "get_record", "arguments": {"table": "deals", "id": 1}}</tool_call>'
TOOLS = [tool for tool in backoffice.TOOL_SCHEMAS if tool["function"]["name"] == "get_record"]


def episode(url: str, *, tool_mode: str = "", seed: int = 0):
    backend = OpenAIBackend(base_url=url, model="smollm2", server="llama.cpp", tool_mode=tool_mode)
    try:
        return backend, run_episode(
            backend=backend,
            messages=[{"role": "user", "content": f"Repeat this line exactly and write nothing else:\n{CALL}"}],
            tools=TOOLS,
            environment="backoffice",
            world_seed=1,
            seed=seed,
            params=SamplingParams(temperature=0, max_new_tokens=36),
            limits=EpisodeLimits(max_turns=2),
        ).transcript
    finally:
        backend.close()


def test_the_server_cannot_render_tools_so_text_mode_is_the_default(llama_server):
    caps = httpx.get(f"{llama_server}/props", timeout=120).json()["chat_template_caps"]
    assert caps["supports_tools"] is False
    backend, _ = episode(llama_server)
    assert backend.tool_mode == "text"


def test_the_model_calls_a_tool_through_the_server_and_sees_the_observation(llama_server):
    _, transcript = episode(llama_server)
    first = transcript["turns"][0]
    assert first["tool_calls"] and first["tool_calls"][0]["name"] == "get_record"
    assert first["observations"][0]["status"] == "ok"
    assert json.loads(first["observations"][0]["content"])["id"] == 1
    assert len(transcript["turns"]) == 2
    for turn in transcript["turns"]:
        assert completion_text(llama_server, turn["completion_token_ids"]) == turn["text"]
        assert len(turn["logprobs"]) == len(turn["completion_token_ids"])
    # The server rendered the tool's answer into the second prompt (its ids come from /tokenize).
    second_prompt = httpx.post(
        f"{llama_server}/detokenize", json={"tokens": transcript["turns"][1]["prompt_token_ids"]}, timeout=30
    ).json()["content"]
    assert "<tools>" in second_prompt and '"stage"' in second_prompt


def test_native_mode_sends_the_tools_field_which_this_template_ignores(llama_server):
    # Chosen per probe model: in native mode this GGUF template drops the tools, so the prompt the
    # model reads has no tool list — why llama.cpp's profile defaults to text.
    _, native = episode(llama_server, tool_mode="native")
    _, text = episode(llama_server, tool_mode="text")
    native_prompt = completion_text(llama_server, native["turns"][0]["prompt_token_ids"])
    text_prompt = completion_text(llama_server, text["turns"][0]["prompt_token_ids"])
    assert "<tools>" not in native_prompt and "<tools>" in text_prompt
