"""A database still locked after the busy timeout (SQLite's one writer) is a 503 with Retry-After, never a 500."""

import sqlite3
from unittest import mock

import pytest
from django.core.management import CommandError, call_command
from django.db import OperationalError
from django.test import RequestFactory

from api.errors import exception_handler
from web.busy import DatabaseBusyMiddleware


def real_lock_error(tmp_path) -> OperationalError:
    """SQLite's own error, from a second writer while a first holds the write lock."""
    path = tmp_path / "busy.sqlite3"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN IMMEDIATE")
    other = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as error:
        return OperationalError(*error.args)
    finally:
        holder.close()
        other.close()
    raise AssertionError("the second writer was not refused")


@pytest.mark.parametrize("path", ["/login/", "/environments/"])
def test_a_locked_database_is_a_503_with_retry_after_on_pages(tmp_path, path):
    middleware = DatabaseBusyMiddleware(lambda request: None)
    response = middleware.process_exception(RequestFactory().post(path), real_lock_error(tmp_path))
    assert response.status_code == 503 and response["Retry-After"].isdigit()
    assert b"busy" in response.content


def test_a_locked_database_is_a_503_with_retry_after_in_the_api(tmp_path):
    response = exception_handler(real_lock_error(tmp_path), {"view": None})
    assert response.status_code == 503 and response["Retry-After"].isdigit()
    assert response.data["code"] == "database_busy"


def test_other_database_errors_are_not_called_busy():
    middleware = DatabaseBusyMiddleware(lambda request: None)
    assert middleware.process_exception(RequestFactory().get("/"), OperationalError("no such table: x")) is None
    assert exception_handler(OperationalError("no such table: x"), {"view": None}).status_code == 500


# The service each command calls, and the arguments that reach it.
COMMANDS = {
    "calibrate": ("calibration.services.campaign_start", ["--environment", "arithmetic", "--model", "m"]),
    "import_tasks": ("curation.imports.tasks_import", ["tasks.jsonl", "--environment", "arithmetic"]),
    "similarity_index": ("similarity.services.versions_index", []),
}


@pytest.fixture
def command_world(arithmetic, django_user_model, tmp_path, monkeypatch):
    from calibration.services import probe_model_add

    django_user_model.objects.create_superuser("root", "root@example.org", "pw-not-used")
    probe_model_add(name="m", backend="openai", base_url="http://127.0.0.1:9/v1", model="m")
    (tmp_path / "tasks.jsonl").write_text('{"key": "k", "prompt": "1+1?", "answer": "2"}\n')
    monkeypatch.chdir(tmp_path)


@pytest.mark.django_db
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_commands_say_the_database_is_busy_not_a_raw_operational_error(command, command_world, tmp_path):
    service, arguments = COMMANDS[command]
    with mock.patch(service, side_effect=real_lock_error(tmp_path)):
        with pytest.raises(CommandError) as raised:
            call_command(command, *arguments)
    assert str(raised.value).startswith("The database is busy with another write") and "again" in str(raised.value)
    # Any other database error is not called busy.
    with mock.patch(service, side_effect=OperationalError("no such table: x")):
        with pytest.raises(OperationalError, match="no such table"):
            call_command(command, *arguments)
