import json
import re
from collections.abc import Iterator
from importlib import resources

import verifiers.v1 as vf

INSTRUCTION = "Solve the problem. Put only the final number in \\boxed{}.\n\n"
NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


class WordArithmeticTaskConfig(vf.TaskConfig):
    answer_anywhere: bool = False
    """Count any number in the reply that equals the answer, not only the one in its single \\boxed{}."""
    max_reply_chars: int = 2000
    """The longest reply that still earns the `brief` reward."""


class WordArithmeticConfig(vf.TasksetConfig):
    topics: list[str] = ["shopping", "travel", "baking"]
    """Which topics' problems to load."""
    task: WordArithmeticTaskConfig = WordArithmeticTaskConfig()


class WordArithmeticData(vf.TaskData):
    topic: str
    solution: str
    """A worked solution that ends in `#### <answer>`."""


def _number(text: str) -> float | None:
    try:
        return float(text.strip().strip("$").replace(",", ""))
    except ValueError:
        return None


class WordArithmeticTask(vf.Task[WordArithmeticData, vf.State, WordArithmeticTaskConfig]):
    @property
    def key(self) -> str:
        return self.data.id or super().key

    @property
    def answer(self) -> float:
        return float(self.data.solution.rsplit("####", 1)[1].strip())

    @vf.reward(weight=1.0)
    async def correct(self, trace: vf.Trace) -> float:
        reply = trace.last_reply
        if self.config.answer_anywhere:
            return 1.0 if any(_number(found) == self.answer for found in NUMBER.findall(reply)) else 0.0
        if reply.count("\\boxed{") != 1:
            return 0.0
        return 1.0 if _number(vf.extract_boxed_answer(reply, strict=True)) == self.answer else 0.0

    @vf.reward(weight=0.25)
    async def brief(self, trace: vf.Trace) -> float:
        return 1.0 if len(trace.last_reply) <= self.config.max_reply_chars else 0.0


class WordArithmeticTaskset(vf.Taskset[WordArithmeticTask, WordArithmeticConfig]):
    def load(self) -> Iterator[WordArithmeticTask]:
        text = resources.files(__package__).joinpath("problems.jsonl").read_text(encoding="utf-8")
        for line in text.splitlines():
            row = json.loads(line)
            if row["topic"] in self.config.topics:
                data = WordArithmeticData(
                    id=row["id"], prompt=INSTRUCTION + row["question"], topic=row["topic"], solution=row["solution"]
                )
                yield WordArithmeticTask(data, self.config.task)
