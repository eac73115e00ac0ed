"""A fresh PostgreSQL database per benchmark run, next to the one DATABASE_URL names."""

from urllib.parse import urlsplit, urlunsplit


def fresh_database(url: str, *, suffix: str) -> str:
    """Drop and create `<name><suffix>` on the server of `url`; returns the new database's URL."""
    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/") + suffix
    admin = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        connection.execute(f'CREATE DATABASE "{name}"')
    return urlunsplit(parts._replace(path="/" + name))
