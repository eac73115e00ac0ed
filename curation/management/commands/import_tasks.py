from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from curation import imports
from curation.management.commands._import_common import (
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
        parser.add_argument("--environment", required=True, help="Environment name.")
        parser.add_argument("--create", action="store_true", help="Create the environment if it does not exist.")
        parser.add_argument("--domain", default="math", help="Domain of a newly created environment.")
        parser.add_argument("--owner", default="", help="Username that owns the tasks (default: the first superuser).")
        parser.add_argument("--no-audit", action="store_true", help="Skip the reference-answer and gameability audits.")
        parser.add_argument(
            "--mapping", default="", help="A column mapping saved in the environment (with --mapping-file: save it so)."
        )
        parser.add_argument(
            "--mapping-file",
            type=Path,
            help='A column mapping as JSON, e.g. {"prompt": "{question}", "answer_column": "answer", '
            '"answer_extractor": "after_hashes"}.',
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
