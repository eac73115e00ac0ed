"""Run by NeMo Gym's own Python (scripts/side-env.sh), never imported by Passband's suite.

    python nemo_gym_side.py < {"export": EXPORT.jsonl, "resources_url": URL, "answers": [[task key, text], ...]}

(on stdin: NeMo Gym reads the command line as Hydra overrides).

1. NeMo Gym's data loader checks every line of a `nemo_gym` export the way `ng_prepare_data` does
   (`compute_sample_metrics`: JSON, then its `BaseRunRequest` model), and counts the tools.
2. NeMo Gym's own client (`ServerClient`, the one its agents use) posts `/seed_session` and `/verify`
   to the resources server at RESOURCES_URL for each (task key, reply text) of `answers`, and its
   `BaseVerifyResponse` model reads each answer.

Prints one JSON object: {"offending": [...], "tools": {key: n}, "verdicts": [{task_key, text, reward, ...}]}.
"""

import asyncio
import json
import sys
from pathlib import Path
from urllib.parse import urlsplit

from nemo_gym.base_resources_server import BaseRunRequest, BaseVerifyResponse
from nemo_gym.config_types import BaseServerConfig
from nemo_gym.server_utils import ServerClient, get_response_json, raise_for_status
from nemo_gym.train_data_utils import compute_sample_metrics
from omegaconf import OmegaConf

sys.path.insert(0, str(Path(__file__).parent))  # this folder's responses.py, without the test package
from responses import response_saying  # noqa: E402


async def verify_all(client: ServerClient, rows: dict, answers: list) -> list[dict]:
    verdicts = []
    for key, text in answers:
        row = rows[key]
        seeded = await client.post(server_name="passband", url_path="/seed_session", json=row)
        await raise_for_status(seeded)
        answer = await client.post(
            server_name="passband", url_path="/verify", json=row | {"response": response_saying(text)}
        )
        await raise_for_status(answer)
        body = await get_response_json(answer)
        checked = BaseVerifyResponse.model_validate(body)
        verdicts.append(
            {"task_key": key, "text": text, "reward": checked.reward, "mask_sample": body.get("mask_sample")}
        )
    return verdicts


def main() -> None:
    request = json.load(sys.stdin)
    export, resources_url, answers = request["export"], request["resources_url"], request["answers"]
    offending, tools, rows = [], {}, {}
    with open(export) as lines:
        for index, line in enumerate(lines):
            metrics, is_offending = compute_sample_metrics(line)
            if is_offending:
                offending.append(index)
                continue
            row = json.loads(line)
            BaseRunRequest.model_validate(row)
            rows[row["task_key"]] = row
            tools[row["task_key"]] = metrics.number_of_tools.total
    where = urlsplit(resources_url)
    head = BaseServerConfig(host=where.hostname, port=where.port)
    # The global config NeMo Gym's head server would serve: one resources server named "passband".
    config = OmegaConf.create(
        {"passband": {"resources_servers": {"passband": {"host": where.hostname, "port": where.port}}}}
    )
    client = ServerClient(head_server_config=head, global_config_dict=config)
    verdicts = asyncio.run(verify_all(client, rows, answers))
    print(json.dumps({"offending": offending, "tools": tools, "verdicts": verdicts}))


if __name__ == "__main__":
    main()
