"""A reward function for TRL's GRPOTrainer that scores with Passband's verifiers. Pure: no Django import.

    from engine.integrations.trl_reward import passband_reward

    trainer = GRPOTrainer(model=..., reward_funcs=passband_reward, train_dataset=load_dataset("parquet", ...))

TRL calls a reward function with ``prompts``, ``completions`` and every other dataset column; a
Passband `trl` export carries ``answer`` and ``verifier`` (JSON text). The prompt goes to the
verifier exactly as in calibration (the math verifier refuses an answer that only restates the
question: "17 + 25" for "What is 17 + 25?"), so training pays what the probe paid.
"""

from __future__ import annotations

import json
from typing import Any

from engine.verifiers import verify


def passband_reward(
    prompts: list[Any], completions: list[Any], answer: list[str | None], verifier: list[Any], **columns: Any
) -> list[float | None]:
    """One reward per completion: 1.0 pass, 0.0 fail, None when the verifier could not decide
    (TRL reads None as "no reward from this function"). ``prompts``: text or chat messages, as TRL
    passes them; ``completions``: text or a list of chat messages; ``verifier``: a config or its JSON text."""
    return [
        verify(
            verifier=json.loads(config) if isinstance(config, str) else config,
            completion=completion,
            answer=reference,
            prompt=prompt,
        ).reward
        for prompt, completion, reference, config in zip(prompts, completions, answer, verifier, strict=True)
    ]
