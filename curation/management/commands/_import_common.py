"""What the import commands share: who owns the tasks, which environment, how the report is printed."""

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

from curation import services
from curation.errors import CurationError
from curation.models import Environment


def import_owner(username: str):
    users = get_user_model().objects
    if username:
        user = users.filter(username=username).first()
    else:
        user = users.filter(is_superuser=True).order_by("pk").first()
    if user is None:
        raise CommandError(f"No user {username!r}." if username else "No superuser to own the tasks; pass --owner.")
    return user


def import_environment(name: str, *, create: bool, domain: str, default_verifier: dict | None) -> Environment:
    environment = Environment.objects.filter(name=name).first()
    if environment is not None:
        return environment
    if not create:
        raise CommandError(f"No environment {name!r}; pass --create to make it.")
    try:
        return services.environment_create(name=name, domain=domain, default_verifier=default_verifier)
    except CurationError as error:
        raise CommandError(f"--environment: {error}") from None


def write_report(command, report) -> None:
    """The import report on the command's output: duplicates (the first ten), audit findings, the summary."""
    for line in report.duplicates[:10]:
        command.stdout.write(f"duplicate: {line}")
    if len(report.duplicates) > 10:
        more = len(report.duplicates) - 10
        command.stdout.write(f"… and {more} more duplicates (the same content was already there).")
    for line in report.audit_failures:
        command.stdout.write(f"audit failed: {line}")
    for line in report.gameable:
        command.stdout.write(f"gameable: {line}")
    command.stdout.write(command.style.SUCCESS(report.summary()))


def rejected(command, error) -> CommandError:
    """The CommandError for a rejected import, after writing each problem to stderr."""
    for problem in error.report.problems:
        command.stderr.write(str(problem))
    return CommandError(error.report.summary())
