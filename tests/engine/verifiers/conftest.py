"""The verifiers are pure Python: their tests run without Django (``pytest -p no:django``).

pyproject.toml's addopts carry pytest-django's ``--reuse-db``; with that plugin disabled the
option would be unknown and pytest would refuse to start, so accept it here as a no-op.
"""

import pytest


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    if not pluginmanager.has_plugin("django"):
        parser.addoption("--reuse-db", action="store_true", help="ignored: pytest-django is disabled")
