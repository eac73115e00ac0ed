"""A ready release as a NeMo Gym 0.4 environment folder: run NeMo Gym from inside it.

    <folder>/README.md                                   how to run it
    <folder>/manifest.json                               the release's manifest (with its quality cards' summary)
    <folder>/quality_card.schema.json                    the JSON Schema of each row's `quality_card`
    <folder>/resources_servers/<name>/configs/<name>.yaml
        the resources server `<name>` (entrypoint app.py) and the agent `<name>_simple_agent` (NeMo Gym's
        built-in simple_agent, the policy model `policy_model`) with two datasets: `train` and `example`
    <folder>/resources_servers/<name>/app.py             a NeMo Gym resources server that hands /seed_session and
                                                         /verify to Passband's scorer at `passband_url`
    <folder>/resources_servers/<name>/requirements.txt   what NeMo Gym installs in that server's virtualenv
    <folder>/resources_servers/<name>/data/train.jsonl   the release's `nemo_gym` rows
    <folder>/resources_servers/<name>/data/example.jsonl its first five rows (NeMo Gym's `gym env test` reads them)

`<name>` is `passband_release_<id>`. NeMo Gym resolves `config_paths`, `jsonl_fpath` and a server's folder
from its working directory, so its commands run from `<folder>`. The scoring stays in Passband's Python
(NeMo Gym 0.4 needs 3.12, Passband 3.11): `python -m engine.integrations.nemo_gym --port 8001` serves it,
and app.py forwards to it. tests/engine/integrations/test_nemo_gym_folder.py runs NeMo Gym's own config
parser, `ng_prepare_data` and client on a folder built from a release.
"""

from __future__ import annotations

import collections
import json
import shutil
from pathlib import Path

import yaml

from curation import files
from engine import quality_card
from releases.errors import ReleaseError
from releases.folders import new_folder
from releases.models import Release, ReleaseStatus
from releases.services import release_file_name

NEMO_GYM_VERSION = "0.4.0"
DEFAULT_PASSBAND_URL = "http://127.0.0.1:8001"
EXAMPLE_ROWS = 5
# NeMo Gym's dataset licenses (nemo_gym.config_types.DatasetConfig): a train dataset must name one.
LICENSES = (
    "Apache 2.0",
    "MIT",
    "Creative Commons Attribution 4.0 International",
    "Creative Commons Attribution-ShareAlike 4.0 International",
    "CC BY-SA 4.0",
    "CC BY-NC 3.0",
    "GNU General Public License v3.0",
    "TBD",
)
# Passband's free-form domains, as NeMo Gym's Domain values (its resources servers must declare one).
DOMAINS = {
    "math": "math",
    "code": "coding",
    "coding": "coding",
    "tool use": "agent",
    "tool_use": "agent",
    "tools": "agent",
    "workflow": "agent",
    "agent": "agent",
    "knowledge": "knowledge",
}

APP_PY = '''"""Passband release {release} as a NeMo Gym resources server.

NeMo Gym starts this file (`gym env start` / `ng_run`); it forwards each /seed_session and /verify to
Passband's scorer, `python -m engine.integrations.nemo_gym`, at the config's `passband_url`. The row's
Passband columns (`expected_answer`, `verifier`, `task_key`, ...) travel with the request.
"""

from pydantic import ConfigDict

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseRunRequest,
    BaseSeedSessionResponse,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.server_utils import get_response_json, raise_for_status, request


class PassbandResourcesServerConfig(BaseResourcesServerConfig):
    passband_url: str


class PassbandRunRequest(BaseRunRequest):
    model_config = ConfigDict(extra="allow")


class PassbandVerifyRequest(BaseVerifyRequest):
    model_config = ConfigDict(extra="allow")


class PassbandVerifyResponse(BaseVerifyResponse):
    model_config = ConfigDict(extra="allow")


class PassbandResourcesServer(SimpleResourcesServer):
    config: PassbandResourcesServerConfig

    async def _passband(self, path, body):
        answer = await request("POST", self.config.passband_url.rstrip("/") + path, json=body)
        await raise_for_status(answer)
        return await get_response_json(answer)

    async def seed_session(self, body: PassbandRunRequest) -> BaseSeedSessionResponse:
        await self._passband("/seed_session", body.model_dump(mode="json", exclude_none=True))
        return BaseSeedSessionResponse()

    async def verify(self, body: PassbandVerifyRequest) -> PassbandVerifyResponse:
        answer = await self._passband("/verify", body.model_dump(mode="json", exclude_none=True))
        return PassbandVerifyResponse.model_validate(answer)


if __name__ == "__main__":
    PassbandResourcesServer.run_webserver()
'''


def server_name(release: Release) -> str:
    return f"passband_release_{release.pk}"


def release_nemo_gym_folder(
    *, release: Release, folder: Path, passband_url: str = DEFAULT_PASSBAND_URL, license: str = "TBD"
) -> Path:
    """Write `release` as a NeMo Gym environment folder at `folder` (new, or empty); returns it.
    ReleaseError when the release is not ready or empty, its file is missing, or `license` is not one
    NeMo Gym accepts. Written beside `folder` first and renamed into place."""
    if release.status != ReleaseStatus.READY:
        raise ReleaseError(f"Release {release.pk} is {release.status}, not ready: build it first.")
    manifest = release.manifest or {}
    if not manifest.get("tasks"):
        raise ReleaseError(f"Release {release.pk} holds no task: a NeMo Gym dataset needs rows.")
    if license not in LICENSES:
        raise ReleaseError(f"license {license!r}: NeMo Gym accepts one of {', '.join(LICENSES)}.")
    name = server_name(release)
    with new_folder(folder, what="environment") as staging:
        server = staging / "resources_servers" / name
        (server / "configs").mkdir(parents=True)
        (server / "data").mkdir()
        stored = release_file_name(release=release, format="nemo_gym", file_type="jsonl")
        try:
            with files.stored_file_local(stored) as source:
                shutil.copyfile(source, server / "data" / "train.jsonl")
        except FileNotFoundError:
            raise ReleaseError(f"Release {release.pk} has no file nemo_gym.jsonl in storage.") from None
        with open(server / "data" / "train.jsonl", encoding="utf-8") as rows:
            example = [line for _, line in zip(range(EXAMPLE_ROWS), rows)]
        (server / "data" / "example.jsonl").write_text("".join(example), encoding="utf-8")
        (server / "configs" / f"{name}.yaml").write_text(
            nemo_gym_config(release=release, passband_url=passband_url, license=license)
        )
        (server / "app.py").write_text(APP_PY.format(release=release.pk))
        (server / "requirements.txt").write_text(f"nemo-gym=={NEMO_GYM_VERSION}\n")
        (staging / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        shutil.copyfile(quality_card.SCHEMA_PATH, staging / quality_card.SCHEMA_PATH.name)
        (staging / "README.md").write_text(folder_readme(release=release, passband_url=passband_url))
    return Path(folder)


def nemo_gym_domain(release: Release) -> str:
    """NeMo Gym's Domain for the release: its environment's domain, else the most common one of its tasks."""
    domain = release.environment.domain if release.environment else ""
    if not domain:
        counts = collections.Counter((release.manifest or {}).get("domains") or {})
        domain = counts.most_common(1)[0][0] if counts else ""
    return DOMAINS.get((domain or "").strip().lower(), "other")


def nemo_gym_config(*, release: Release, passband_url: str, license: str) -> str:
    """The YAML NeMo Gym's config parser reads: one resources server and one simple agent with its datasets."""
    name = server_name(release)
    data = f"resources_servers/{name}/data"
    environment = release.environment.name if release.environment else "several environments"
    config = {
        name: {
            "resources_servers": {
                name: {
                    "entrypoint": "app.py",
                    "domain": nemo_gym_domain(release),
                    "verified": False,
                    "description": f"Passband release {release.pk} ({environment}): tasks scored by their own "
                    "Passband verifiers",
                    "value": "Calibrated RL tasks: in band for the release's probe model",
                    "passband_url": passband_url,
                }
            }
        },
        f"{name}_simple_agent": {
            "responses_api_agents": {
                "simple_agent": {
                    "entrypoint": "app.py",
                    "resources_server": {"type": "resources_servers", "name": name},
                    "model_server": {"type": "responses_api_models", "name": "policy_model"},
                    "datasets": [
                        {"name": "train", "type": "train", "jsonl_fpath": f"{data}/train.jsonl", "license": license},
                        {"name": "example", "type": "example", "jsonl_fpath": f"{data}/example.jsonl"},
                    ],
                }
            }
        },
    }
    return yaml.safe_dump(config, sort_keys=False, allow_unicode=True)


def folder_readme(*, release: Release, passband_url: str) -> str:
    name = server_name(release)
    config = f"resources_servers/{name}/configs/{name}.yaml"
    tasks = (release.manifest or {}).get("tasks", 0)
    return f"""# Passband release {release.pk} for NeMo Gym {NEMO_GYM_VERSION}

{tasks} tasks as a NeMo Gym resources server (`{name}`) and a simple agent (`{name}_simple_agent`) whose
`train` dataset is `resources_servers/{name}/data/train.jsonl`. Each row's reward comes from the task's own
Passband verifier, served by Passband (its Python, not NeMo Gym's) at `{passband_url}`; a verifier error
answers `mask_sample: true`, never a reward of 0.

Run every NeMo Gym command from this folder:

```sh
python -m engine.integrations.nemo_gym --port 8001     # in Passband's environment: the scorer
ng_prepare_data "+config_paths=[{config}]" +output_dirpath=data/prepared +mode=train_preparation
ng_run "+config_paths=[{config},responses_api_models/openai_model/configs/openai_model.yaml]"
```

Change `passband_url` in the config when the scorer runs elsewhere. `manifest.json` is the release's
manifest: filter, thresholds, counts per band, each file's sha256 and a summary of the tasks' quality cards.
Each row of `train.jsonl` carries its task version's `quality_card` (schema: `quality_card.schema.json`).
"""
