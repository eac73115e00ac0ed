"""The command lives in releases because the quality card's selector does (curation cannot import it)."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from curation.models import Environment
from curation.repo_harbor import ExportRefused, harbor_export
from releases.quality_cards import quality_card_of


class Command(BaseCommand):
    help = (
        "Write an environment's tasks whose verifier kind exports Harbor folders (repository and code tasks) "
        "as Harbor task folders (instruction.md, task.toml, environment/, tests/, solution/), each task.toml "
        "with its quality card."
    )

    def add_arguments(self, parser):
        parser.add_argument("--environment", required=True, help="Environment name.")
        parser.add_argument("--out", type=Path, required=True, help="Folder to write <task key>/ folders into.")

    def handle(self, *args, environment: str, out: Path, **options):
        env = Environment.objects.filter(name=environment).first()
        if env is None:
            raise CommandError(f"--environment {environment}: no such environment.")
        try:
            written = harbor_export(
                environment=env, out_dir=Path(out), card_of=lambda version: quality_card_of(version=version)
            )
        except ExportRefused as error:
            raise CommandError(f"--environment {environment}: nothing written, {error}.") from None
        self.stdout.write(f"{len(written)} Harbor task folder(s) written to {out}.")
