"""python manage.py release_hub_folder RELEASE -o FOLDER [--license LICENSE]"""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from releases.errors import ReleaseError
from releases.hub import release_hub_folder
from releases.models import Release


class Command(BaseCommand):
    help = (
        "Write a ready release as a Hugging Face Hub dataset folder (dataset card, one config per format); "
        "push it with `hf upload ORG/NAME FOLDER . --repo-type dataset`."
    )

    def add_arguments(self, parser):
        parser.add_argument("release", type=int)
        parser.add_argument("-o", "--output", required=True, type=Path, help="A new (or empty) folder.")
        parser.add_argument(
            "--license", default="other", help="The card's license id (Hub license ids: apache-2.0, cc-by-4.0, ...)."
        )

    def handle(self, *args, release, output, license, **options):
        found = Release.objects.select_related("environment", "probe_model").filter(pk=release).first()
        if found is None:
            raise CommandError(f"No release {release}.")
        try:
            folder = release_hub_folder(release=found, folder=output, license=license)
        except ReleaseError as error:
            raise CommandError(str(error)) from None
        self.stderr.write(
            f"Wrote release {found.pk} as a Hub dataset to {folder}. "
            f"Push it with: hf upload ORG/NAME {folder} . --repo-type dataset"
        )
