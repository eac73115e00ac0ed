"""`load_demo` loads the backoffice workflow environment: 33 tool tasks whose audits pass."""

import pytest
from django.core.management import call_command

from curation.models import Environment, TaskVersion


@pytest.mark.django_db
def test_load_demo_loads_the_backoffice_environment(tmp_path, settings):
    settings.VAR_DIR = tmp_path
    call_command("load_demo", only="backoffice")
    environment = Environment.objects.get(name="backoffice")
    versions = TaskVersion.objects.filter(task__environment=environment)
    assert versions.count() == 33
    assert all(version.tools and version.verifier["kind"] == "state_check" for version in versions)
    assert all(version.audit_passed for version in versions)
    call_command("load_demo", only="backoffice")  # safe to run again
    assert TaskVersion.objects.filter(task__environment=environment).count() == 33


@pytest.mark.django_db
def test_load_demo_loads_the_repository_episodes_from_the_committed_sdist(tmp_path, settings, media):
    settings.VAR_DIR = tmp_path
    call_command("load_demo", only="repository-episodes")
    versions = TaskVersion.objects.filter(task__environment__name="repository-episodes")
    assert versions.count() == 25
    assert all(version.verifier["kind"] == "repo_tests" and version.tools for version in versions)
    snapshots = {version.verifier["snapshot"] for version in versions}
    assert len(list((media / "repo-snapshots").iterdir())) == len(snapshots) == 25
    call_command("load_demo", only="repository-episodes")  # safe to run again
    assert TaskVersion.objects.filter(task__environment__name="repository-episodes").count() == 25
