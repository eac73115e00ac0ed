from django.core.management.base import BaseCommand

from calibration import services


class Command(BaseCommand):
    help = (
        "Diagnose too_hard calibrations (suspect_verifier, truncated or hard) from their stored rollouts: "
        "those banded before diagnoses existed, or all with --all."
    )

    def add_arguments(self, parser):
        parser.add_argument("--all", action="store_true", help="Diagnose every too_hard calibration again.")

    def handle(self, *args, **options):
        diagnosed = services.too_hard_diagnose(only_missing=not options["all"])
        self.stdout.write(f"{diagnosed} too_hard calibration{'s' if diagnosed != 1 else ''} diagnosed.")
