"""What a repository's tests see when graded: pytest and the task's declared dependencies, never
Passband's environment (its packages by name or by path) and no nested user namespace. Real sandbox,
real pytest; each attack is a test of the repository that passes only if the attack works."""

from pathlib import Path

import django
import pytest

from engine.repo_tasks import snapshots
from engine.repo_tasks.grading import RepoTaskSpec, grade
from engine.sandbox.view import repository_view, sandbox_for

SITE_PACKAGES = str(Path(django.__file__).resolve().parents[1])
TESTS = f"""import ctypes
import importlib
import os
import sys


def test_django_imports():
    importlib.import_module("dj" + "ango")


def test_the_workers_site_packages_on_the_path():
    sys.path.append({SITE_PACKAGES!r})
    importlib.import_module("cel" + "ery")


def test_a_nested_user_namespace():
    pid = os.fork()
    if pid == 0:
        os._exit(0 if ctypes.CDLL(None, use_errno=True).unshare(0x10000000) == 0 else 1)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


def test_a_declared_dependency():
    import six

    assert six.PY3
"""
SNAPSHOT = snapshots.build_from_files({"tests/test_view.py": TESTS.encode(), "README.md": b"view\n"})
ATTACKS = ("test_django_imports", "test_the_workers_site_packages_on_the_path", "test_a_nested_user_namespace")


def spec(*tests, dependencies=()):
    return RepoTaskSpec(
        snapshot=snapshots.digest_of(SNAPSHOT),
        fail_to_pass=tuple(f"tests/test_view.py::{name}" for name in tests),
        timeout_seconds=60,
        dependencies=tuple(dependencies),
    )


@pytest.fixture(autouse=True)
def namespaces():
    if sandbox_for(repository_view()).isolation()["mode"] != "namespaces":
        pytest.skip("the sandbox runs without namespaces here: its filesystem view is not a boundary")


@pytest.mark.parametrize("attack", ATTACKS)
def test_a_repositorys_tests_cannot_reach_passbands_environment(attack):
    result = grade(task=spec(attack), snapshot=SNAPSHOT, patch="")
    assert result.outcome == "fail"
    assert result.tests[f"tests/test_view.py::{attack}"].outcome == "failed"


def test_only_the_declared_dependencies_join_pytest():
    undeclared = grade(task=spec("test_a_declared_dependency"), snapshot=SNAPSHOT, patch="")
    assert undeclared.outcome == "fail" and "No module named 'six'" in undeclared.output
    declared = grade(task=spec("test_a_declared_dependency", dependencies=["six"]), snapshot=SNAPSHOT, patch="")
    assert declared.outcome == "pass", declared.detail


def test_a_dependency_that_is_not_installed_is_the_graders_error_not_a_wrong_answer():
    result = grade(
        task=spec("test_a_declared_dependency", dependencies=["passband-no-such"]), snapshot=SNAPSHOT, patch=""
    )
    assert result.outcome == "error"
    assert "passband-no-such is not installed" in result.detail


def test_the_verifier_config_declares_dependencies_by_distribution_name():
    from engine.verifiers import VerifierConfigError
    from engine.verifiers.kinds.repo_tests import parse_config

    config = {"snapshot": snapshots.digest_of(SNAPSHOT), "fail_to_pass": ["tests/test_view.py::test_django_imports"]}
    assert parse_config({**config, "dependencies": ["six"]}).dependencies == ("six",)
    with pytest.raises(VerifierConfigError, match=r"dependencies\[0\]"):
        parse_config({**config, "dependencies": ["six; os.system('x')"]})
