"""An installed world provider whose import insists on acting on the host: its module's top-level code writes a
file and lets the refusal end the import, hoping the host then imports it itself (tests/engine/test_declarations.py).
It is refused, with why, and never imported in the host."""

from engine.worlds.provider import WorldProvider

MARKER = "/tmp/passband-hostile-import-insisted"

with open(MARKER, "w") as marker:
    marker.write(str(__name__))

PROVIDER = WorldProvider(name="insists", claims=lambda task: True, prepare=lambda task, options: None)
