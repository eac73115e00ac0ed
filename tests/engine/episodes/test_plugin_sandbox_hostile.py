"""A plug-in's tools against their sandbox: the sandbox's filesystem view is the rule, not the import check.

The hostile tools live in broken_plugins/escapes.py: its source passes discovery (the import names are
built at run time), so each refusal here is the sandbox's, proven with the real fork server."""

import json
import os
from importlib import metadata
from pathlib import Path

import celery
import django
import pytest

from engine.episodes import plugins
from engine.episodes.world import LocalWorld, SandboxedWorld
from engine.sandbox.view import SandboxView, sandbox_for


@pytest.fixture
def escapes(with_plugins):
    found = with_plugins(escapes="escapes")
    assert "escapes" in found.plugins, found.refused
    if sandbox_for(SandboxView.of(distributions=("iniconfig",))).isolation()["mode"] != "namespaces":
        pytest.skip("the sandbox runs without namespaces here: its filesystem view is not a boundary")
    return found.plugins["escapes"]


def call(name, arguments=None):
    result = SandboxedWorld(environment="escapes", seed=0).call(name, arguments or {})
    assert result.status == "ok", result.content
    return json.loads(result.content)


def test_passbands_packages_import_in_the_worker_but_not_in_a_tool_call(escapes):
    assert LocalWorld(environment="escapes", seed=0).call("import_django", {}).status == "ok"  # the probe works
    seen = call("import_django")
    assert seen["django"].startswith("ImportError") and seen["celery"].startswith("ImportError")


def test_a_tool_that_puts_the_workers_site_packages_on_its_path_finds_nothing_there(escapes):
    site_packages = str(Path(django.__file__).resolve().parents[1])
    folders = [site_packages, str(Path(celery.__file__).resolve().parents[1]), "/usr/lib/python3/dist-packages"]
    seen = call("import_from_path", {"folders": folders})
    assert seen["django"].startswith("ImportError")
    assert site_packages not in seen["seen"]  # the virtualenv is not mounted, or is an empty tmpfs


def test_a_tool_cannot_create_a_nested_user_namespace(escapes):
    assert call("new_user_namespace") == {"unshared": False}


def test_the_dependencies_a_plugin_declares_are_mounted_and_accepted_by_discovery(escapes):
    assert escapes.dependencies == ("iniconfig",)
    assert call("own_dependency") == {"iniconfig": "iniconfig"}


def test_the_issues_dynamic_import_is_refused_at_discovery(tmp_path):
    source = tmp_path / "sneaky.py"
    source.write_text("def tool(world):\n    return __import__('importlib').import_module('dj' + 'ango')\n")
    problems = plugins._foreign_imports("sneaky", source, package="sneaky")
    assert problems == ["sneaky (sneaky.py:2) imports a module named at run time; import it by name"]
    source.write_text("import importlib\nimportlib.import_module('django')\n")
    assert plugins._foreign_imports("sneaky", source, package="sneaky") == ["sneaky (sneaky.py:2) imports django"]


def test_a_plugin_declaring_a_distribution_that_is_not_installed_is_refused(tmp_path, monkeypatch):
    """Its declaration is read in a helper from its source, as installed: a copy of `escapes` naming a missing one."""
    source = (Path(__file__).parent / "broken_plugins" / "escapes.py").read_text(encoding="utf-8")
    (tmp_path / "escapes_missing.py").write_text(source + "\nDEPENDENCIES = ('passband-no-such-distribution',)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    point = metadata.EntryPoint(name="escapes", value="escapes_missing", group=plugins.GROUP)
    [refused] = plugins.discover_from([point]).refused
    assert refused.value == "escapes_missing"
    assert "DEPENDENCIES: passband-no-such-distribution is not installed" in refused.error


def test_a_restricted_view_mounts_only_the_named_distributions():
    entries = SandboxView.of(distributions=("pytest",)).entries()
    names = {os.path.basename(entry) for entry in entries}
    assert {"pytest", "_pytest", "pluggy", "iniconfig"} <= names  # pytest and what it requires
    assert not names & {"django", "celery", "passband", "engine"}
