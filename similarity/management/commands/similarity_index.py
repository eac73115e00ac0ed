from django.core.management.base import BaseCommand, CommandError

from accounts.errors import database_busy_as_command_error
from curation.models import Environment
from similarity import services


class Command(BaseCommand):
    help = (
        "Sign task versions that have no MinHash/embedding yet and flag near-duplicates and contamination. "
        "--recheck re-evaluates every version's flags (after a threshold change); --rebuild recomputes the "
        "signatures too."
    )

    def add_arguments(self, parser):
        parser.add_argument("--environment", default="", help="Only this environment (default: every one).")
        parser.add_argument("--recheck", action="store_true", help="Check every version again, not only new ones.")
        parser.add_argument("--rebuild", action="store_true", help="Drop and recompute the signatures first.")

    def handle(self, *args, environment: str, recheck: bool, rebuild: bool, **options):
        # Flags are written in short batches, each committed: what was indexed stays indexed.
        with database_busy_as_command_error(what_stays="What was indexed stays indexed."):
            self._index(environment=environment, recheck=recheck, rebuild=rebuild)

    def _index(self, *, environment: str, recheck: bool, rebuild: bool) -> None:
        environment_id = None
        if environment:
            found = Environment.objects.filter(name=environment).first()
            if found is None:
                raise CommandError(f"--environment: no environment {environment!r}.")
            environment_id = found.pk
        if rebuild:
            dropped = services.signatures_drop(environment_id=environment_id)
            self.stdout.write(f"Dropped {dropped} signatures.")
        result = services.versions_index(environment_id=environment_id, recheck=recheck or rebuild)
        self.stdout.write(result.summary())
