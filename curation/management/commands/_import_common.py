"""What the import commands share: who owns the tasks, which environment, how the report is printed."""

import json
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

from curation import import_mappings, services
from curation.errors import CurationError
from curation.models import Environment
from engine.task_mapping import ColumnMapping, MappingError


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


def import_mapping(environment, user, *, name: str, path: Path | None) -> ColumnMapping | None:
    """The mapping to read rows with: from --mapping-file (saved as --mapping when given), or saved as --mapping."""
    try:
        if path is None:
            return import_mappings.import_mapping_load(environment=environment, name=name) if name else None
        path = Path(path)  # call_command passes options as given
        try:
            column_mapping = ColumnMapping.from_dict(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError) as error:
            where = f"{path}, field '{error.field}'" if isinstance(error, MappingError) else str(path)
            raise CommandError(f"--mapping-file {where}: {getattr(error, 'reason', error)}") from None
        if name:
            import_mappings.import_mapping_save(environment=environment, name=name, mapping=column_mapping, by=user)
        return column_mapping
    except CurationError as error:
        raise CommandError(f"--mapping: {error}") from None
