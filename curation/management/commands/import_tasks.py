from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from accounts.errors import database_busy_as_command_error
from curation import imports
from curation.management.commands._import_common import (
    add_destination_arguments,
    add_mapping_arguments,
    add_no_audit_argument,
    import_environment,
    import_mapping,
    import_owner,
    rejected,
    write_report,
)


class Command(BaseCommand):
    help = (
        "Import a task file into an environment, all or nothing: Passband's format (JSONL, CSV, Parquet), "
        "or any dataset (JSONL, CSV, Parquet, Arrow, a `datasets` folder) read with a column mapping."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path, help="A file, or a folder written by datasets' save_to_disk.")
        add_destination_arguments(parser, domain="math")
        add_no_audit_argument(parser)
        add_mapping_arguments(
            parser,
            example='as JSON, e.g. {"prompt": "{question}", "answer_column": "answer", '
            '"answer_extractor": "after_hashes"}',
        )

    def handle(
        self,
        *args,
        file: Path,
        environment: str,
        create: bool,
        domain: str,
        owner: str,
        no_audit: bool,
        mapping: str,
        mapping_file: Path | None,
        **options,
    ):
        if not file.exists():
            raise CommandError(f"{file}: no such file or folder.")
        user = import_owner(owner)
        env = import_environment(
            environment, create=create, domain=domain, default_verifier={"kind": "math"} if domain == "math" else None
        )
        column_mapping = import_mapping(env, user, name=mapping, path=mapping_file)
        try:
            # All or nothing: a locked database leaves nothing imported.
            with database_busy_as_command_error(what_stays="Nothing was imported."):
                report = imports.tasks_import(
                    environment=env,
                    owner=user,
                    path=file,
                    filename=file.name,
                    mapping=column_mapping,
                    run_audits=not no_audit,
                )
        except imports.ImportRejected as error:
            raise rejected(self, error) from None
        write_report(self, report)
