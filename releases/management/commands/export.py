"""python manage.py export --environment NAME [--band B] [--status S] [--flag F] [--model M] --format F -o FILE

The filter is the task list's (releases.task_filters)."""

import dataclasses
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from engine import formats
from releases import records, task_filters


class Command(BaseCommand):
    help = "Stream an environment's current task versions to a JSONL or Parquet file in a trainer's format."

    def add_arguments(self, parser):
        parser.add_argument("--environment", required=True)
        parser.add_argument("--band", default="", help="Only tasks in this band under the probe model.")
        parser.add_argument("--status", default="", help="Only tasks with this status.")
        parser.add_argument("--flag", default="", help="Only tasks with this calibration flag, or audit_failed.")
        parser.add_argument(
            "--model", default="", help="Probe model whose calibration rows carry; default: the latest used."
        )
        parser.add_argument("--format", required=True, choices=formats.names())
        parser.add_argument(
            "--file-type", choices=formats.FILE_TYPES, help="Default: from the file name (.parquet or .jsonl)."
        )
        parser.add_argument("-o", "--output", required=True, type=Path)
        parser.add_argument(
            "--exclude-contaminated", action="store_true", help="Leave out tasks flagged as public benchmark items."
        )

    def handle(
        self, *args, environment, band, status, model, flag, format, file_type, output, exclude_contaminated, **options
    ):
        filters = {"environment": environment, "band": band, "status": status, "model": model, "flag": flag}
        try:
            task_filter = task_filters.task_filter_parse(filters, required=("environment",))
        except task_filters.TaskFilterError as error:
            raise CommandError(f"--{error.field}: {error.reason}") from None
        if exclude_contaminated:
            task_filter = dataclasses.replace(task_filter, contaminated=False)
        env, probe_model = task_filter.environment, task_filter.probe_model
        file_type = file_type or ("parquet" if output.suffix == ".parquet" else "jsonl")
        versions = records.export_versions(task_filter=task_filter)
        count = formats.write_file(
            records=records.export_records(versions=versions, probe_model=probe_model),
            format=format,
            file_type=file_type,
            path=output,
        )
        self.stderr.write(f"Wrote {count} tasks of {env.name} as {format} {file_type} to {output}.")
