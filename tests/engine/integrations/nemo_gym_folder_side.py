"""Run by NeMo Gym's own Python (scripts/side-env.sh) from inside a folder written by
`manage.py release_nemo_gym_folder`; never imported by Passband's suite.

    cd FOLDER && python nemo_gym_folder_side.py < {"server": NAME, "answers": [[task key, text], ...]}

(on stdin: NeMo Gym reads the command line as Hydra overrides).

1. NeMo Gym's config parser reads `resources_servers/NAME/configs/NAME.yaml` as `ng_prepare_data` does
   (`config_paths`, no policy model), and finds its server instances and their datasets.
2. `ng_prepare_data`'s own processor (`TrainDataProcessor.run`, mode `train_preparation`) checks every row
   of the `train` dataset and collates it into `prepared/train.jsonl`.
3. The folder's `app.py` is loaded the way `ng_run` hands a server its config (NEMO_GYM_CONFIG_DICT and
   NEMO_GYM_CONFIG_PATH) and served; NeMo Gym's own client (`ServerClient`) posts /seed_session and /verify
   to it for each (task key, reply) of `answers`, with the bodies NeMo Gym's simple_agent builds from the
   prepared rows (its own request types); app.py hands them to Passband's scorer at the config's `passband_url`.

Prints one JSON object: {"servers", "datasets", "prepared", "offending", "verdicts"}.
"""

import asyncio
import importlib.util
import io
import json
import os
import sys
from contextlib import redirect_stdout
from pathlib import Path

from omegaconf import OmegaConf

sys.path.insert(0, str(Path(__file__).parent))  # this folder's responses.py, without the test package
from responses import response_saying  # noqa: E402


def parse(server: str):
    from nemo_gym.global_config import GlobalConfigDictParser, GlobalConfigDictParserConfig

    initial = OmegaConf.merge(
        GlobalConfigDictParserConfig.NO_MODEL_GLOBAL_CONFIG_DICT,
        {
            "config_paths": [f"resources_servers/{server}/configs/{server}.yaml"],
            "output_dirpath": "prepared",
            "mode": "train_preparation",
        },
    )
    parser = GlobalConfigDictParser()
    config = parser.parse(
        GlobalConfigDictParserConfig(
            initial_global_config_dict=initial, skip_load_from_cli=True, skip_load_from_dotenv=True
        )
    )
    return parser, config


async def serve_and_verify(server_class, config, server: str, rows: dict, answers: list) -> list[dict]:
    import uvicorn
    from nemo_gym.base_resources_server import BaseVerifyResponse
    from nemo_gym.config_types import BaseServerConfig
    from nemo_gym.server_utils import ServerClient, get_response_json, raise_for_status

    # As `ng_run` starts a server: its config from the environment, its client from the global config.
    instance = server_class(
        config=server_class.load_config_from_global_config(),
        server_client=ServerClient(
            head_server_config=BaseServerConfig(host="127.0.0.1", port=1), global_config_dict=config
        ),
    )
    app = instance.setup_webserver()
    instance.setup_liveness(app)
    web = uvicorn.Server(uvicorn.Config(app, host=instance.config.host, port=instance.config.port, log_level="warning"))
    serving = asyncio.create_task(web.serve())
    while not web.started:
        await asyncio.sleep(0.02)
    client = ServerClient(head_server_config=BaseServerConfig(host="127.0.0.1", port=1), global_config_dict=config)
    from responses_api_agents.simple_agent.app import SimpleAgentRunRequest, SimpleAgentVerifyRequest

    verdicts = []
    try:
        for key, text in answers:
            # The bodies simple_agent's /run posts for a prepared row, built by its own request types.
            agent_request = SimpleAgentRunRequest.model_validate(rows[key]).model_dump()
            seeded = await client.post(server_name=server, url_path="/seed_session", json=agent_request)
            await raise_for_status(seeded)
            verify_request = SimpleAgentVerifyRequest.model_validate(
                agent_request | {"response": response_saying(text)}
            ).model_dump()
            answer = await client.post(server_name=server, url_path="/verify", json=verify_request)
            await raise_for_status(answer)
            body = await get_response_json(answer)
            checked = BaseVerifyResponse.model_validate(body)
            verdicts.append(
                {
                    "task_key": key,
                    "reward": checked.reward,
                    "outcome": body.get("outcome"),
                    "mask_sample": body.get("mask_sample"),
                }
            )
    finally:
        web.should_exit = True
        await serving
    return verdicts


def main() -> None:
    request = json.load(sys.stdin)
    server, answers = request["server"], request["answers"]
    from nemo_gym.train_data_utils import TrainDataProcessor

    parser, config = parse(server)
    instances = parser.filter_for_server_instance_configs(config)
    servers = {instance.name: instance.SERVER_TYPE for instance in instances}
    datasets = {
        dataset.name: {"type": dataset.type, "jsonl_fpath": dataset.jsonl_fpath, "license": dataset.license}
        for instance in instances
        for dataset in instance.datasets or []
    }
    with redirect_stdout(io.StringIO()):  # its progress report; this script's stdout is its answer
        TrainDataProcessor().run(config)
    prepared = [json.loads(line) for line in Path("prepared/train.jsonl").read_text().splitlines()]
    offending = []
    from nemo_gym.train_data_utils import compute_sample_metrics

    with open(datasets["train"]["jsonl_fpath"]) as lines:
        offending = [index for index, line in enumerate(lines) if compute_sample_metrics(line)[1]]

    # Hand app.py its config the way `ng_run` does for a server process it starts.
    os.environ["NEMO_GYM_CONFIG_DICT"] = OmegaConf.to_yaml(config)
    os.environ["NEMO_GYM_CONFIG_PATH"] = server
    spec = importlib.util.spec_from_file_location("passband_app", f"resources_servers/{server}/app.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rows = {row["task_key"]: row for row in prepared}
    verdicts = asyncio.run(serve_and_verify(module.PassbandResourcesServer, config, server, rows, answers))
    print(
        json.dumps(
            {
                "servers": servers,
                "datasets": datasets,
                "prepared": [{"task_key": row["task_key"], "agent_ref": row["agent_ref"]} for row in prepared],
                "offending": offending,
                "verdicts": verdicts,
            }
        )
    )


if __name__ == "__main__":
    main()
