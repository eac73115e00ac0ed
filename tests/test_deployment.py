"""Settings from the environment, safe production defaults, and the compose file."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run_settings(env: dict) -> subprocess.CompletedProcess:
    code = "import django; django.setup(); from django.conf import settings as s; print(s.DEBUG, s.PASSBAND_FLOOR, s.PASSBAND_RETIRE, s.DATABASES['default']['ENGINE'], s.CELERY_BROKER_URL)"
    base = {
        key: value
        for key, value in os.environ.items()
        if key not in {"DEBUG", "SECRET_KEY", "DATABASE_URL", "CELERY_BROKER_URL"}
    }
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**base, "DJANGO_SETTINGS_MODULE": "passband.settings", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_production_refuses_to_start_without_a_secret_key():
    result = run_settings({})
    assert result.returncode != 0 and "SECRET_KEY must be set" in result.stderr


def test_debug_is_off_unless_asked_and_embedded_defaults_need_no_server():
    debug, floor, retire, engine, broker = run_settings({"SECRET_KEY": "x"}).stdout.split()
    assert (debug, floor, retire) == ("False", "0.02", "0.7")
    assert engine.endswith("sqlite3") and broker == "passband-filesystem://"


def test_embedded_defaults_create_their_folders(tmp_path):
    # A worker on a fresh machine must find the SQLite folder and the filesystem broker's queues.
    result = run_settings({"SECRET_KEY": "x", "PASSBAND_VAR_DIR": str(tmp_path / "var")})
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "var" / "broker" / "queue").is_dir() and (tmp_path / "var" / "broker" / "in-flight").is_dir()


def test_thresholds_and_servers_come_from_the_environment():
    result = run_settings(
        {
            "SECRET_KEY": "x",
            "DEBUG": "1",
            "PASSBAND_FLOOR": "0.03",
            "PASSBAND_RETIRE": "0.8",
            "DATABASE_URL": "postgres://u@db:5432/p",
            "CELERY_BROKER_URL": "redis://r:6379/0",
        }
    )
    assert result.stdout.split() == ["True", "0.03", "0.8", "django.db.backends.postgresql", "redis://r:6379/0"]
    bad = run_settings({"SECRET_KEY": "x", "PASSBAND_FLOOR": "0.9"})
    assert bad.returncode != 0 and "PASSBAND_FLOOR" in bad.stderr


def compose_command() -> list[str] | None:
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    return None


@pytest.mark.skipif(compose_command() is None, reason="neither docker-compose nor docker compose is installed")
def test_compose_file_is_valid_and_has_every_service():
    env = {
        **os.environ,
        "SECRET_KEY": "compose-check",
        "POSTGRES_PASSWORD": "compose-check",
        "MINIO_ROOT_USER": "compose-check",
        "MINIO_ROOT_PASSWORD": "compose-check",
    }
    result = subprocess.run(
        [*compose_command(), "-f", "docker-compose.yml", "config", "--services"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    services = set(result.stdout.split())
    assert {
        "postgres",
        "redis",
        "minio",
        "minio-bucket",
        "web",
        "worker-generate",
        "worker-verify",
        "worker-similarity",
        "beat",
        "flower",
    } <= services


MISSPELT = [("DEBUG", "ture"), ("SECURE_COOKIES", "flase"), ("CELERY_TASK_ALWAYS_EAGER", "2")]
SPELLINGS = [("TRUE", True), (" yes ", True), ("On", True), ("1", True), ("0", False), ("no", False), ("OFF", False)]


@pytest.mark.parametrize(("variable", "value"), MISSPELT)
def test_a_misspelt_yes_no_setting_is_refused_naming_it(variable, value, monkeypatch):
    from django.core.exceptions import ImproperlyConfigured

    from passband.settings_parts.env import env_bool

    monkeypatch.setenv(variable, value)
    with pytest.raises(ImproperlyConfigured) as refused:
        env_bool(variable)
    assert (
        str(refused.value) == f"{variable} must be a yes/no value (1, true, yes, on, 0, false, no, off), got {value!r}"
    )


def test_a_misspelt_yes_no_setting_stops_the_start():
    """Each setting reads its yes/no value through the same reader (above); one start shows the refusal stops
    the process with the message."""
    result = run_settings({"SECRET_KEY": "x", "SECURE_COOKIES": "flase"})
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert "SECURE_COOKIES must be a yes/no value (1, true, yes, on, 0, false, no, off), got 'flase'" in result.stderr


@pytest.mark.parametrize(("value", "meant"), [*SPELLINGS, ("", False), ("   ", False)])
def test_yes_no_settings_take_every_accepted_spelling_in_any_case(value, meant, monkeypatch):
    from passband.settings_parts.env import env_bool

    monkeypatch.setenv("PASSBAND_SOME_SWITCH", value)
    assert env_bool("PASSBAND_SOME_SWITCH") is meant
    assert env_bool("PASSBAND_SOME_SWITCH", default=True) is (meant if value.strip() else True)


def test_a_started_server_reads_debug_in_any_spelling():
    on, off = (run_settings({"SECRET_KEY": "x", "DEBUG": value}) for value in (" On ", "OFF"))
    assert on.returncode == 0 and off.returncode == 0, on.stderr + off.stderr
    assert on.stdout.split()[0] == "True" and off.stdout.split()[0] == "False"


@pytest.mark.parametrize(
    ("env", "problem"),
    [
        (
            {"PASSBAND_OUTBOUND_SECRETS": '{"SECRET_KEY": ["https://tools.example.com"]}'},
            "SECRET_KEY configures Passband itself",
        ),
        (
            {"PASSBAND_OUTBOUND_SECRETS": '{"DATABASE_URL": ["https://tools.example.com"]}'},
            "DATABASE_URL configures Passband itself",
        ),
        ({"PASSBAND_OUTBOUND_SECRETS": '{"TOOLS_KEY": ["ftp://tools"]}'}, "is not an origin like https://host:port"),
        ({"PASSBAND_OUTBOUND_ALLOW_HOSTS": "tools:port"}, "'tools:port' is not host or host:port"),
        (
            {
                "PASSBAND_JUDGES": '{"grader": {"base_url": "https://judge.example.com/v1", "model": "m", "api_key_env": "SECRET_KEY"}}'
            },
            "judge grader: api_key_env 'SECRET_KEY' is not a declared outbound secret",
        ),
        (
            {
                "PASSBAND_JUDGES": '{"grader": {"base_url": "https://judge.example.com/v1", "model": "m", "api_key_env": "JUDGE_KEY"}}',
                "PASSBAND_OUTBOUND_SECRETS": '{"JUDGE_KEY": ["https://other.example.com"]}',
            },
            "judge grader: api_key_env JUDGE_KEY may be sent only to https://other.example.com:443",
        ),
    ],
)
def test_outbound_settings_that_would_send_a_secret_astray_stop_the_start(env, problem):
    result = run_settings({"SECRET_KEY": "x", **env})
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr and problem in result.stderr
