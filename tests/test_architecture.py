"""The layout's rules at run time: the engine's packages, imported as a trainer imports them, load no Django.
The static checks (import layers, lint and format, types, the engine's wheel) are a step of `make test` of
their own, before the suite: scripts/check.sh."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Each of the engine's top-level packages and modules imported in a fresh interpreter; what of Django's world
# came with them.
PROBE = """
import importlib, pkgutil, sys
import engine
names = [module.name for module in pkgutil.iter_modules(engine.__path__, "engine.")]
for name in names:
    importlib.import_module(name)
loaded = sorted({name.split(".")[0] for name in sys.modules} & {"django", "rest_framework", "celery"})
print(len(names), "imported; loaded:", ",".join(loaded) or "none")
"""


def test_importing_the_engine_loads_no_django():
    # import-linter (scripts/check.sh) reads the import statements; this catches what they cannot show: a
    # third-party dependency of the engine that pulls Django in, or an import made at run time.
    result = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    count, _, loaded = result.stdout.strip().splitlines()[-1].partition(" imported; loaded: ")
    assert int(count) >= 15 and loaded == "none", result.stdout
