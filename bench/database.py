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


def django_in_fresh_database(*, suffix: str, reuse: bool = False) -> None:
    """Point Django at a fresh `<DATABASE_URL's name><suffix>` database, set it up and migrate it; with `reuse`,
    at the one an earlier run left (migrated again, data kept).

    Exits with a message when DATABASE_URL is not a PostgreSQL server.
    """
    import os
    import sys

    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        sys.exit("Set DATABASE_URL to a PostgreSQL server (the benchmark creates its own database).")
    url = os.environ["DATABASE_URL"]
    if reuse:
        parts = urlsplit(url)
        os.environ["DATABASE_URL"] = urlunsplit(parts._replace(path=parts.path + suffix))
    else:
        os.environ["DATABASE_URL"] = fresh_database(url, suffix=suffix)
    # The benchmark's own servers listen on 127.0.0.1: allowed as an operator allows a deployment's own (docs/operations.md).
    os.environ.setdefault("PASSBAND_OUTBOUND_ALLOW_HOSTS", "127.0.0.1")
    os.environ.setdefault("SECRET_KEY", "passband-bench-only")
    os.environ["DJANGO_SETTINGS_MODULE"] = "passband.settings"
    os.environ["LOG_LEVEL"] = "WARNING"

    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


def exact_match_environment(*, tasks: int, verifier: dict | None = None):
    """A superuser and an environment of `tasks` exact-match tasks ("Say 42"); returns (user, environment).

    `verifier` replaces the environment's default, {"kind": "exact"}."""
    from django.contrib.auth import get_user_model

    from curation.imports import tasks_import
    from curation.services import environment_create
    from tests.factories import jsonl

    user = get_user_model().objects.create_superuser("bench", "bench@example.invalid", "bench")
    environment = environment_create(name="bench", domain="text", default_verifier=verifier or {"kind": "exact"})
    tasks_import(
        environment=environment,
        owner=user,
        data=jsonl(*[{"key": f"t-{i}", "prompt": f"Say 42, please ({i}).", "answer": "42"} for i in range(tasks)]),
        filename="bench.jsonl",
        run_audits=False,
    )
    return user, environment


def campaign_until_done(*, environment, probe_model, user, rollouts: int, round_size: int, seed: int, timeout_s: float):
    """Start a campaign with every round sampled at once and wait for it to finish; returns the campaign
    and the seconds from start to done. Exits the benchmark when it takes longer than `timeout_s`."""
    import sys
    import time

    from calibration import services
    from calibration.models import Campaign

    started = time.perf_counter()
    campaign = services.campaign_start(
        environment=environment,
        probe_model=probe_model,
        created_by=user,
        rollouts=rollouts,
        round_size=round_size,
        seed=seed,
    )
    while Campaign.objects.get(pk=campaign.pk).status != Campaign.Status.DONE:
        if time.perf_counter() - started > timeout_s:
            sys.exit(f"the campaign did not finish within {timeout_s:.0f} s")
        time.sleep(0.1)
    return campaign, time.perf_counter() - started
