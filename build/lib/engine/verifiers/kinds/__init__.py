"""One module per verifier kind. Each exposes ``KIND``, ``parse_config(raw) -> config`` and
``check(config, *, completion, answer, prompt) -> Check``; kinds that can generate completions
which must fail during a task audit also expose ``audit_failing_completions(config, answer)``."""
