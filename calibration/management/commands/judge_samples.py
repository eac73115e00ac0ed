from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from accounts.errors import ServiceError
from calibration import services


class Command(BaseCommand):
    help = (
        "Draw judged rollouts (tasks whose verifier is llm_judge) for blind review, as beat does every "
        "PASSBAND_JUDGE_SAMPLE_EVERY seconds. Deterministic and safe to repeat: a rollout is drawn at most once."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--share", type=float, default=None, help="Share of judged rollouts eligible (PASSBAND_JUDGE_SAMPLE_SHARE)."
        )
        parser.add_argument(
            "--limit", type=int, default=None, help="Items per judge and prompt version (PASSBAND_JUDGE_SAMPLE_LIMIT)."
        )
        parser.add_argument("--seed", type=int, default=None, help="The draw's seed (PASSBAND_JUDGE_SAMPLE_SEED).")

    def handle(self, *args, **options):
        try:
            added = services.judge_samples_draw(
                share=settings.PASSBAND_JUDGE_SAMPLE_SHARE if options["share"] is None else options["share"],
                limit=settings.PASSBAND_JUDGE_SAMPLE_LIMIT if options["limit"] is None else options["limit"],
                seed=settings.PASSBAND_JUDGE_SAMPLE_SEED if options["seed"] is None else options["seed"],
            )
        except ServiceError as error:
            raise CommandError(str(error)) from None
        self.stdout.write(self.style.SUCCESS(f"{added} judged rollout(s) drawn for blind review."))
