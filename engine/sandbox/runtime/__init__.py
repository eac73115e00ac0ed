"""The sandbox's runtime: what runs inside the fork server and its runs (standard library only).

Loaded by ``engine/sandbox/server.py`` as the package ``passband_sandbox``; importable as
``engine.sandbox.runtime`` too (for tests of the wire format). Modules: ``wire`` (values by
value, frames), ``isolation`` (namespaces, root, rlimits), ``audit`` (the fallback's audit
hook), ``supervisor`` (one run's process tree), ``program`` (runs the model's code), ``judge``
(runs the tests).
"""
