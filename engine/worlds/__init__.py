"""World providers: what turns a task version into the worlds its episodes act on (no Django here).

* `provider`: the interface (``WorldProvider``, ``WorldTask``, ``EpisodeWorld``, the errors).
* `registry`: built-in providers by name, installed ones through the entry point group `passband.environments`.
* `providers`: Passband's own (a tool-environment plug-in, a repository, an MCP or OpenEnv server).

See docs/environments.md ("World providers").
"""
