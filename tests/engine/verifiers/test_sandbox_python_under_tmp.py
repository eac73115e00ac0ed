"""A Python install that lives under /tmp (a CI clone's virtualenv) serves the sandbox: the server binds it
from the host's /tmp, and each run, which mounts a private /tmp of its own, binds it again, read-only.

A real virtualenv made with the standard library's venv, with one module in its site-packages, runs the
sandbox's server; the program imports that module and cannot write into the install.
"""

import subprocess
import tempfile
import venv
from pathlib import Path

import pytest

from engine.sandbox import Sandbox, SandboxLimits

PROGRAM = """
import errno, os, sys
import tmp_install_probe
print(tmp_install_probe.VALUE, tmp_install_probe.__file__)
for path, mode in ((tmp_install_probe.__file__, "a"), (tmp_install_probe.__file__ + ".new", "w")):
    try:
        open(path, mode).close()
        print("wrote", path)
    except OSError as error:
        print(errno.errorcode[error.errno])
open("/tmp/scratch", "w").write("the run's own /tmp takes writes")
print(open("/tmp/scratch").read())
"""


@pytest.fixture(scope="module")
def install_under_tmp():
    """A virtualenv in a fresh folder directly under /tmp (not wherever TMPDIR points), with a module."""
    with tempfile.TemporaryDirectory(dir="/tmp", prefix="passband-venv-") as folder:
        prefix = Path(folder) / "venv"
        venv.EnvBuilder(symlinks=True, with_pip=False).create(prefix)
        python = prefix / "bin" / "python"
        purelib = subprocess.run(
            [str(python), "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
            env={},
        ).stdout.strip()
        Path(purelib, "tmp_install_probe.py").write_text("VALUE = 42\n")
        yield prefix


@pytest.fixture
def sandbox(install_under_tmp):
    instance = Sandbox(isolation="auto", python=str(install_under_tmp / "bin" / "python"))
    if instance.isolation()["mode"] != "namespaces":
        instance.close()
        pytest.skip("the fallback has no private /tmp: nothing hides the install")
    yield instance
    instance.close()


def test_a_python_install_under_tmp_runs_the_programs_and_is_read_only_to_them(sandbox, install_under_tmp):
    run = sandbox.run_script(program=PROGRAM, stdin="", limits=SandboxLimits(wall_seconds=20))
    assert (run.status, run.exit_code) == ("exited", 0), run
    lines = run.stdout.strip().splitlines()
    # The program ran on the install under /tmp, and imported from its site-packages.
    value, module = lines[0].split()
    assert value == "42" and module.startswith(f"{install_under_tmp}/lib/")
    # The install is bound read-only: no module can be added (the mount refuses), none changed (the files are
    # not the run's user's either, which the kernel checks first).
    assert lines[1] in ("EACCES", "EROFS") and lines[2] == "EROFS"
    # While the run's private /tmp, over which the install is bound, still does.
    assert lines[3] == "the run's own /tmp takes writes"
    assert Path(module).read_text() == "VALUE = 42\n" and not Path(module + ".new").exists()


def test_the_tests_mode_judges_with_the_install_under_tmp(sandbox):
    run = sandbox.run_tests(
        program="import tmp_install_probe\ndef answer():\n    return tmp_install_probe.VALUE\n",
        tests=["assert answer() == 42"],
        limits=SandboxLimits(wall_seconds=20),
    )
    assert run.passed, run
