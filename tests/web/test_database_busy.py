"""A database still locked after the busy timeout (SQLite's one writer) is a 503 with Retry-After, never a 500."""

import sqlite3

import pytest
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
