"""Responses API answers as a NeMo Gym agent sends them. Plain Python with no imports: the NeMo Gym side
script (nemo_gym_side.py, run by NeMo Gym's own Python) loads it too."""


def response_saying(text):
    """A Responses API response whose output is one assistant message, as a NeMo Gym agent sends it."""
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 0,
        "model": "policy",
        "status": "completed",
        "output": [
            {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        ],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }
