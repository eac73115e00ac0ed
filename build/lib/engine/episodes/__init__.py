"""Multi-turn tool-use episodes and the tool environments they act on (no Django here).

* `world`: tool environments by name, their initial state, and where tool code runs
  (`SandboxedWorld` for episodes, `LocalWorld` for trusted input only).
* `backoffice`: the back-office workflow environment (SQLite), its tools and schemas.
* `backoffice_tasks`: its 33 demo tasks, verified by `state_check`.
* `runner`: `run_episode` on the openai and transformers backends; the transcript format.

See docs/episodes.md.
"""
