from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from curation import imports
from curation.management.commands._import_common import (
    add_destination_arguments,
    import_environment,
    import_owner,
    rejected,
    write_report,
)
from curation.repo_harbor import harbor_import


class Command(BaseCommand):
    help = "Import Harbor task folders (as export_harbor writes them) as repository tasks, with their audits."

    def add_arguments(self, parser):
        parser.add_argument("folder", type=Path, help="A Harbor task folder, or a folder of them.")
        add_destination_arguments(parser)

    def handle(self, *args, folder: Path, environment: str, create: bool, owner: str, **options):
        folder = Path(folder)
        if not folder.is_dir():
            raise CommandError(f"{folder}: no such folder.")
        env = import_environment(environment, create=create, domain="code", default_verifier=None)
        try:
            report = harbor_import(environment=env, owner=import_owner(owner), root=folder)
        except imports.ImportRejected as error:
            raise rejected(self, error) from None
        write_report(self, report)
