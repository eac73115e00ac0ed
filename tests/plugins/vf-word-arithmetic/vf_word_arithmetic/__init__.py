"""Word problems with integer answers, as a verifiers v1 taskset.

`load()` reads the rows shipped in problems.jsonl (the topics the config asks for); each task's
`@vf.reward` methods score the model's last reply.
"""

from vf_word_arithmetic.taskset import (
    WordArithmeticConfig,
    WordArithmeticData,
    WordArithmeticTask,
    WordArithmeticTaskConfig,
    WordArithmeticTaskset,
)

__all__ = [
    "WordArithmeticConfig",
    "WordArithmeticData",
    "WordArithmeticTask",
    "WordArithmeticTaskConfig",
    "WordArithmeticTaskset",
]
