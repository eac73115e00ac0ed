"""python manage.py export --environment NAME [--band B] [--status S] [--model M] --format F -o FILE"""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from calibration import selectors as calibration_selectors
from calibration.models import ProbeModel
from curation.models import Environment
from engine import formats
from releases import services as releases
from releases.errors import ReleaseError


class Command(BaseCommand):
    help = "Stream an environment's current task versions to a JSONL or Parquet file in a trainer's format."

    def add_arguments(self, parser):
        parser.add_argument("--environment", required=True)
        parser.add_argument("--band", default="", help="Only tasks in this band under the probe model.")
        parser.add_argument("--status", default="", help="Only tasks with this status.")
        parser.add_argument(
            "--model", default="", help="Probe model whose calibration rows carry; default: the latest used."
        )
        parser.add_argument("--format", required=True, choices=formats.FORMATS)
        parser.add_argument(
            "--file-type", choices=formats.FILE_TYPES, help="Default: from the file name (.parquet or .jsonl)."
        )
        parser.add_argument("-o", "--output", required=True, type=Path)
        parser.add_argument(
            "--exclude-contaminated", action="store_true", help="Leave out tasks flagged as public benchmark items."
        )

    def handle(
        self, *args, environment, band, status, model, format, file_type, output, exclude_contaminated, **options
    ):
        env = Environment.objects.filter(name=environment).first()
        if env is None:
            raise CommandError(f"--environment: no environment named {environment!r}.")
        if model:
            probe_model = ProbeModel.objects.filter(name=model).first()
            if probe_model is None:
                raise CommandError(f"--model: no probe model named {model!r}.")
        else:
            probe_model = calibration_selectors.default_probe_model(env)
        file_type = file_type or ("parquet" if output.suffix == ".parquet" else "jsonl")
        try:
            versions = releases.export_versions(
                environment=env,
                probe_model=probe_model,
                band=band,
                status=status,
                exclude_contaminated=exclude_contaminated,
            )
        except ReleaseError as error:
            raise CommandError(str(error)) from None
        count = formats.write_file(
            records=releases.export_records(versions=versions, probe_model=probe_model),
            format=format,
            file_type=file_type,
            path=output,
        )
        self.stderr.write(f"Wrote {count} tasks of {env.name} as {format} {file_type} to {output}.")
