from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from curation import imports
from curation.management.commands._import_common import (
    add_destination_arguments,
    add_no_audit_argument,
    import_environment,
    import_owner,
    rejected,
    write_report,
)
from curation.repo_imports import RowsRejected, swebench_rows_import


class Command(BaseCommand):
    help = (
        "Import SWE-bench-style rows (JSONL: instance_id, problem_statement, patch, test_patch, FAIL_TO_PASS, "
        "PASS_TO_PASS...) as repository tasks; each row's repository is a local snapshot in --snapshots."
    )

    def add_arguments(self, parser):
        parser.add_argument("rows", type=Path, help="JSONL file of rows.")
        parser.add_argument(
            "--snapshots", type=Path, required=True, help="Folder of <instance_id>/ work trees or <instance_id>.tar.gz"
        )
        add_destination_arguments(parser)
        add_no_audit_argument(parser, help="Skip the audits.")
        parser.add_argument("--keep-flaky", action="store_true", help="Do not drop PASS_TO_PASS tests found flaky.")

    def handle(self, *args, rows: Path, snapshots: Path, environment: str, create: bool, owner: str, **options):
        rows, snapshots = Path(rows), Path(snapshots)  # call_command passes options as given
        if not rows.is_file():
            raise CommandError(f"{rows}: no such file.")
        if not snapshots.is_dir():
            raise CommandError(f"--snapshots {snapshots}: no such folder.")
        env = import_environment(environment, create=create, domain="code", default_verifier=None)
        try:
            result = swebench_rows_import(
                environment=env,
                owner=import_owner(owner),
                rows_path=rows,
                snapshots_dir=snapshots,
                run_audits=not options["no_audit"],
                drop_flaky=not options["keep_flaky"],
            )
        except RowsRejected as error:
            raise CommandError(f"{rows.name}: nothing imported. " + "; ".join(error.problems[:20])) from None
        except imports.ImportRejected as error:
            raise rejected(self, error) from None
        for instance_id, dropped in result.dropped_flaky.items():
            self.stdout.write(f"{instance_id}: dropped flaky PASS_TO_PASS {', '.join(dropped)}")
        write_report(self, result.report)
