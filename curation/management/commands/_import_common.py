"""What the import commands share: their common options, who owns the tasks, which environment, how the rows go
in and how the report is printed."""

import json
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

from curation import import_mappings, imports, services
from curation.errors import CurationError
from curation.models import Environment
from engine.task_mapping import ColumnMapping, MappingError


def add_destination_arguments(parser, *, domain: str | None = None) -> None:
    """--environment, --create and --owner (and --domain for a newly created environment, when given a default)."""
    parser.add_argument("--environment", required=True, help="Environment name.")
    parser.add_argument("--create", action="store_true", help="Create the environment if it does not exist.")
    if domain is not None:
        parser.add_argument("--domain", default=domain, help="Domain of a newly created environment.")
    parser.add_argument("--owner", default="", help="Username that owns the tasks (default: the first superuser).")


def add_no_audit_argument(parser, *, help: str = "Skip the reference-answer and gameability audits.") -> None:
    parser.add_argument("--no-audit", action="store_true", help=help)


def add_mapping_arguments(parser, *, example: str) -> None:
    """--mapping (a saved column mapping) and --mapping-file (a JSON one, `example` shown in its help)."""
    parser.add_argument(
        "--mapping", default="", help="A column mapping saved in the environment (with --mapping-file: save it so)."
    )
    parser.add_argument("--mapping-file", type=Path, help=f"A column mapping {example}.")


def json_object_option(text: str, *, option: str, what: str) -> dict:
    """The JSON object an option carries (`what` names its fields in the message), or a CommandError."""
    try:
        value = json.loads(text)
    except ValueError as error:
        raise CommandError(f"{option}: not JSON ({error})") from None
    if not isinstance(value, dict):
        raise CommandError(f"{option}: must be a JSON object of {what}")
    return value


def import_task_dicts(command, *, environment, owner, filename: str, tasks, run_audits: bool) -> None:
    """Import task dicts in Passband's format as one JSONL file, all or nothing, and print the report."""
    data = b"".join(json.dumps(task, ensure_ascii=False).encode() + b"\n" for task in tasks)
    try:
        report = imports.tasks_import(
            environment=environment, owner=owner, filename=filename, data=data, run_audits=run_audits
        )
    except imports.ImportRejected as error:
        raise rejected(command, error) from None
    write_report(command, report)


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
