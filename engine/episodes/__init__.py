"""Multi-turn tool-use episodes and the tool environments they act on (no Django here).

* `plugins`: tool environments are plug-ins, packages declared under the entry point group
  `passband.environments`; discovered, validated and cached here (docs/environments.md).
* `plugin_runtime`: what runs a plug-in's tools, in this process and inside the sandbox.
* `world`: tool environments by name, their initial state, and where tool code runs
  (`SandboxedWorld` for episodes, `replay_state` for replays, `LocalWorld` for trusted input only).
* `stateful`: stateful plug-ins (a gym-style class under the entry point) and `StatefulWorld`, their
  episode's world in one sandbox session.
* `backoffice`: the back-office workflow environment (SQLite), its tools and schemas: a plug-in
  declared in Passband's own pyproject.toml.
* `backoffice_tasks`: its 33 demo tasks, verified by `state_check`.
* `runner`: `run_episode` on the openai and transformers backends; the transcript format.

See docs/episodes.md and docs/environments.md.
"""
