"""python manage.py release_nemo_gym_folder RELEASE -o FOLDER [--passband-url URL] [--license LICENSE]"""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from releases.errors import ReleaseError
from releases.models import Release
from releases.nemo_gym_folder import DEFAULT_PASSBAND_URL, LICENSES, release_nemo_gym_folder, server_name


class Command(BaseCommand):
    help = (
        "Write a ready release as a NeMo Gym 0.4 environment folder (resources server, agent, datasets); "
        "run NeMo Gym from inside it."
    )

    def add_arguments(self, parser):
        parser.add_argument("release", type=int)
        parser.add_argument("-o", "--output", required=True, type=Path, help="A new (or empty) folder.")
        parser.add_argument(
            "--passband-url",
            default=DEFAULT_PASSBAND_URL,
            help="Where `python -m engine.integrations.nemo_gym` serves the scorer (default: %(default)s).",
        )
        parser.add_argument("--license", default="TBD", choices=LICENSES, help="The train dataset's license.")

    def handle(self, *args, release, output, passband_url, license, **options):
        found = Release.objects.select_related("environment").filter(pk=release).first()
        if found is None:
            raise CommandError(f"No release {release}.")
        try:
            folder = release_nemo_gym_folder(release=found, folder=output, passband_url=passband_url, license=license)
        except ReleaseError as error:
            raise CommandError(str(error)) from None
        name = server_name(found)
        self.stderr.write(
            f"Wrote release {found.pk} as a NeMo Gym environment to {folder}. From there, with the scorer "
            f"running (python -m engine.integrations.nemo_gym --port 8001): "
            f'ng_run "+config_paths=[resources_servers/{name}/configs/{name}.yaml,'
            f'responses_api_models/openai_model/configs/openai_model.yaml]"'
        )
