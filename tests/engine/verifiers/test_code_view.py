"""What model-written code sees in the code verifier's sandbox: the standard library and the packages the
task declares, never Passband's virtualenv, settings or source.

Each program defines ``solve()`` that returns 42 only if it found something of the server's Python: a pass
would mean the attack worked. The tasks run through ``verify`` with the verifier's own sandbox choice.
"""

from pathlib import Path

import pytest

from engine.sandbox.view import SandboxView, sandbox_for
from engine.verifiers import verify
from engine.verifiers.base import VerifierConfigError
from engine.verifiers.kinds import code as code_kind

PROJECT_ROOT = str(Path(__file__).resolve().parents[3])
TASK = {"kind": "code", "style": "asserts", "asserts": ["assert solve() == 42"], "timeout_seconds": 20}
FOUND_IF = "def solve():\n{body}\n    return 42 if found else 0\n"

ATTACKS = {
    "import django": "    try:\n        import django\n        found = True\n    except ImportError:\n        found = False",
    "importlib builds the name": (
        "    import importlib\n    try:\n        importlib.import_module('dj' + 'ango')\n        found = True\n"
        "    except ImportError:\n        found = False"
    ),
    "settings module": (
        "    import importlib.util\n"
        "    found = any(importlib.util.find_spec(n) is not None for n in ('passband', 'engine', 'celery', 'redis'))"
    ),
    "site-packages on the path": (
        "    import sys\n    found = any('site-packages' in p or 'dist-packages' in p or '.venv' in p for p in sys.path)"
    ),
    "appending the virtualenv": (
        "    import sys, glob\n"
        "    sys.path.extend(glob.glob('/**/site-packages', recursive=False) + glob.glob('/usr/lib/python3*/site-packages'))\n"
        "    try:\n        import django\n        found = True\n    except ImportError:\n        found = False"
    ),
}


def namespaced() -> bool:
    return sandbox_for(SandboxView.of()).isolation()["mode"] == "namespaces"


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_model_code_sees_nothing_of_passbands_python(name):
    verdict = verify(verifier=TASK, completion=FOUND_IF.format(body=ATTACKS[name]))
    assert verdict.outcome == "fail", (name, verdict.detail)


def test_model_code_cannot_reach_the_project_source_or_virtualenv_on_disk():
    if not namespaced():
        pytest.skip("the fallback isolation has no filesystem boundary (see engine/sandbox/__init__.py)")
    body = (
        "    import os, sys\n"
        f"    found = os.path.exists({PROJECT_ROOT!r}) or os.path.exists(os.path.join(sys.prefix, 'pyvenv.cfg'))"
    )
    verdict = verify(verifier=TASK, completion=FOUND_IF.format(body=body))
    assert verdict.outcome == "fail", verdict.detail


def test_a_declared_package_is_there_and_nothing_else():
    task = {**TASK, "packages": ["numpy"], "asserts": ["assert solve() == 42", "assert django_absent()"]}
    program = (
        "import numpy\n"
        "def solve():\n    return int(numpy.array([40, 2]).sum())\n"
        "def django_absent():\n"
        "    import importlib.util\n    return importlib.util.find_spec('django') is None\n"
    )
    verdict = verify(verifier=task, completion=program)
    assert verdict.outcome == "pass", verdict.detail


def test_the_stdlib_view_still_grades_ordinary_code():
    assert (
        verify(verifier=TASK, completion="import math\ndef solve():\n    return math.isqrt(1764)\n").outcome == "pass"
    )


@pytest.mark.parametrize("packages", [["passband"], ["Passband"], ["no-such-distribution-xyz"], "numpy"])
def test_a_task_cannot_declare_passband_itself_or_a_missing_package(packages):
    with pytest.raises(VerifierConfigError) as raised:
        code_kind.parse_config({**TASK, "packages": packages})
    assert raised.value.field == "packages"
