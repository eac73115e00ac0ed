from datetime import timedelta

from django.core.management.base import BaseCommand, CommandError

from calibration import services


class Command(BaseCommand):
    help = (
        "Drop token ids, logprobs, text and episodes of old verified rollouts of finished campaigns; verdicts, "
        "token counts and costs stay, so counts and calibrations are unchanged. Run VACUUM to reuse the space."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--older-than-days", type=float, required=True, help="Prune rollouts created more than this many days ago."
        )
        parser.add_argument(
            "--keep-per-task",
            type=int,
            default=2,
            help="Keep the first N samples of each task version per campaign whole (default 2).",
        )
        parser.add_argument("--campaign", type=int, default=None, help="Only this campaign's rollouts.")
        parser.add_argument("--dry-run", action="store_true", help="Count what would be pruned; change nothing.")

    def handle(self, *args, **options):
        if options["older_than_days"] < 0 or options["keep_per_task"] < 0:
            raise CommandError("--older-than-days and --keep-per-task must not be negative.")
        count = services.rollouts_prune(
            older_than=timedelta(days=options["older_than_days"]),
            keep_per_task=options["keep_per_task"],
            campaign_id=options["campaign"],
            dry_run=options["dry_run"],
        )
        verb = "would prune" if options["dry_run"] else "pruned"
        self.stdout.write(self.style.SUCCESS(f"{verb} {count} rollout(s)."))
