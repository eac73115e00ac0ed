from django.core.management.base import BaseCommand, CommandError

from accounts.errors import ServiceError
from calibration import services
from curation.models import Environment


class Command(BaseCommand):
    help = (
        "Change an environment's floor and retirement threshold; "
        "bands are recomputed from stored rollouts (no inference)."
    )

    def add_arguments(self, parser):
        parser.add_argument("environment")
        parser.add_argument("--floor", type=float, required=True, help="Pass rates below this are too hard, e.g. 0.02.")
        parser.add_argument(
            "--retire-at", type=float, required=True, help="Pass rates at or above this retire, e.g. 0.70."
        )

    def handle(self, *args, **options):
        environment = Environment.objects.filter(name=options["environment"]).first()
        if environment is None:
            raise CommandError(f"No environment {options['environment']!r}.")
        try:
            refreshed = services.environment_thresholds_set(
                environment=environment, floor=options["floor"], retire_at=options["retire_at"], by=None
            )
        except ServiceError as error:
            raise CommandError(str(error)) from None
        self.stdout.write(
            self.style.SUCCESS(
                f"{environment.name}: floor {environment.floor}, retire at {environment.retire_at}; "
                f"{refreshed} calibration(s) recomputed from stored rollouts."
            )
        )
