"""Trainer integrations: a Passband release consumed through each trainer library's own API.

No Django import anywhere here. `release` reads any release file and scores completions with the
task's own verifier; the other modules import their library, installed by the `trainers` extra:

* `verifiers_taskset`: a verifiers v1 Taskset (and a single-turn harness) over a release file;
  the top-level `passband_release` package exports them under the taskset id `passband-release`.
* `openenv_env`: an OpenEnv environment (reset with a seed picks a task version, step scores a
  completion) with its FastAPI app and typed client.
* `nemo_gym`: a NeMo Gym resources server (`/seed_session`, `/verify`) that scores `nemo_gym` rows.
* `trl_reward`: a reward function for TRL's GRPOTrainer over a `trl` export (no import of trl).

Every path passes the task's prompt and its own verifier config to engine.verifiers.verify, as
calibration does, so a completion gets one verdict wherever it is scored.
"""
