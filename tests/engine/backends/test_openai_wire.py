"""The typed decoding of server answers gives exactly what the generic path over dicts gives."""

import json

import pytest

from engine.backends import openai_wire
from engine.backends.openai_parsing import decode_choices, parse_choices
from engine.backends.openai_transport import FinalError, RetryableError


def _chat_choice(index, *, ids=True, names=True, entry_ids=False, logprobs=(-0.5, -1, -0.25), finish="stop"):
    entries = [
        {"token": f"token_id:{7 + i}" if names else "x", "logprob": value, "bytes": [120], "top_logprobs": []}
        | ({"id": 7 + i} if entry_ids else {})
        for i, value in enumerate(logprobs)
    ]
    return {
        "index": index,
        "message": {"role": "assistant", "content": f"answer {index}"},
        "logprobs": {"content": entries},
        "finish_reason": finish,
        "token_ids": [7 + i for i in range(len(logprobs))] if ids else None,
    }


PAYLOADS = {
    "vllm chat": {
        "choices": [_chat_choice(1), _chat_choice(0)],
        "usage": {"prompt_tokens": 3},
        "prompt_token_ids": [1, 2, 3],
    },
    "ids from names": {"choices": [_chat_choice(0, ids=False), _chat_choice(1, ids=False)], "usage": {}},
    "ids in entries": {
        "choices": [_chat_choice(0, ids=False, names=False, entry_ids=True)] * 1
        + [_chat_choice(1, ids=False, names=False, entry_ids=True)]
    },
    "no ids at all": {"choices": [_chat_choice(0, ids=False, names=False), _chat_choice(1, ids=False, names=False)]},
    "a null logprob": {"choices": [_chat_choice(0, logprobs=(-0.5, None)), _chat_choice(1)]},
    "a boolean logprob": {"choices": [_chat_choice(0, logprobs=(-0.5, True)), _chat_choice(1)]},
    "length": {
        "choices": [_chat_choice(0, finish="length"), _chat_choice(1, finish="length")],
        "prompt_token_ids": None,
    },
    "prompt ids on the choice": {"choices": [_chat_choice(0) | {"prompt_token_ids": [4]}, _chat_choice(1)]},
    "float token id": {"choices": [_chat_choice(0) | {"token_ids": [7.0, 8, 9]}, _chat_choice(1)]},
    "content is null": {"choices": [_chat_choice(0) | {"message": {"content": None}}, _chat_choice(1)]},
    "legacy completions": {
        "choices": [
            {
                "index": i,
                "text": "hi",
                "finish_reason": "stop",
                "logprobs": {"tokens": ["token_id:5", "token_id:6"], "token_logprobs": [-1, -0.5]},
            }
            for i in range(2)
        ],
        "usage": {"prompt_tokens": 2, "completion_tokens": 4},
    },
    "legacy with a null": {
        "choices": [
            {
                "index": i,
                "text": "hi",
                "finish_reason": "eos",
                "prompt_token_ids": [3],
                "logprobs": {"tokens": ["a"], "token_logprobs": [None]},
            }
            for i in range(2)
        ],
    },
}


def _fields(generations):
    return [vars(generation) for generation in generations]


@pytest.mark.parametrize("name", sorted(PAYLOADS))
@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_typed_and_generic_decoding_agree(name, endpoint):
    raw = json.dumps(PAYLOADS[name]).encode()
    assert _fields(decode_choices(raw=raw, endpoint=endpoint, seeds=[10, 11])) == _fields(
        parse_choices(payload=json.loads(raw), endpoint=endpoint, seeds=[10, 11])
    )


def test_the_common_vllm_answer_takes_the_typed_path():
    assert openai_wire.decode_response(json.dumps(PAYLOADS["vllm chat"]).encode()) is not None
    assert openai_wire.decode_response(json.dumps(PAYLOADS["a boolean logprob"]).encode()) is None


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        (b"not json", RetryableError),
        (b"[1, 2]", FinalError),
        (b'{"choices": []}', FinalError),
        (
            b'{"choices": [{"index": 0, "finish_reason": "abort"}, {"index": 1, "finish_reason": "stop"}]}',
            RetryableError,
        ),
        (b'{"choices": [{"index": 0, "finish_reason": "stop"}, {"index": 0, "finish_reason": "stop"}]}', FinalError),
    ],
)
def test_bad_answers_raise_as_before(raw, error):
    with pytest.raises(error):
        decode_choices(raw=raw, endpoint="chat", seeds=[1, 2])
