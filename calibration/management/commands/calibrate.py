import sys
import time

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from accounts.errors import ServiceError, database_busy_as_command_error
from calibration import selectors, services
from calibration.models import Campaign, ProbeModel
from curation.models import Environment


def progress_bar(done: int, total: int, width: int = 30) -> str:
    filled = int(width * done / total) if total else width
    return "[" + "#" * filled + "." * (width - filled) + f"] {done}/{total}"


class Command(BaseCommand):
    help = "Probe an environment's tasks with a model and calibrate their pass rates."

    def add_arguments(self, parser):
        parser.add_argument("--environment", required=True)
        parser.add_argument("--model", required=True, help="Probe model name (see add_probe_model).")
        parser.add_argument(
            "--rollouts",
            type=int,
            default=None,
            help="Rollouts per task (fixed; default 8) or the cap (adaptive; default 256).",
        )
        parser.add_argument(
            "--confidence", type=float, default=0.95, help="Adaptive: stop when a band is this probable."
        )
        parser.add_argument("--policy", choices=["fixed", "adaptive"], default="fixed")
        parser.add_argument("--round-size", type=int, default=8, help="Rollouts per task per round.")
        parser.add_argument("--seed", type=int, default=None)
        parser.add_argument("--limit", type=int, default=None, help="Probe only the first N tasks (by key).")
        parser.add_argument(
            "--max-new-tokens",
            type=int,
            default=None,
            help="Completion budget per rollout; default: the environment's, else the model's.",
        )
        parser.add_argument(
            "--prior-from",
            default=None,
            metavar="CHEAP_MODEL",
            help="Model ladder (adaptive): use this cheaper model's calibration as each task's prior; "
            "covers the tasks --model has not probed yet.",
        )
        mode = parser.add_mutually_exclusive_group()
        mode.add_argument("--wait", action="store_true", help="Queue to the workers and show progress until done.")
        mode.add_argument("--inline", action="store_true", help="Run in this process, with no broker.")

    def handle(self, *args, **options):
        # Each round commits on its own: what was stored stays stored.
        with database_busy_as_command_error(what_stays="What was stored stays stored."):
            self._handle(options)

    def _handle(self, options):
        environment = Environment.objects.filter(name=options["environment"]).first()
        if environment is None:
            raise CommandError(f"No environment {options['environment']!r}.")
        probe_model = ProbeModel.objects.filter(name=options["model"]).first()
        if probe_model is None:
            raise CommandError(f"No probe model {options['model']!r}; add one with add_probe_model.")
        user = get_user_model().objects.filter(is_superuser=True).order_by("pk").first()
        if user is None:
            raise CommandError("No superuser to own the campaign; create one with createsuperuser.")
        versions = None
        if options["limit"]:
            versions = [
                task.current_version
                for task in environment.tasks.select_related("current_version").order_by("key")[: options["limit"]]
            ]
        campaign = self._campaign_start(
            options, environment=environment, probe_model=probe_model, user=user, versions=versions
        )
        self.stdout.write(
            f"Campaign {campaign.pk}: {environment.name} × {probe_model.name}, "
            f"{campaign.policy} {campaign.max_rollouts}, max {campaign.max_new_tokens} new tokens."
        )
        if options["inline"]:
            services.campaign_run_inline(campaign=campaign, progress=self._show_progress)
            self.stdout.write("")
        elif options["wait"]:
            self._wait(campaign)
        else:
            self.stdout.write("Queued; the workers will probe it. Watch it on the campaign page or with --wait.")
            return
        self._print_table(campaign)

    def _campaign_start(self, options, *, environment, probe_model, user, versions):
        """A ladder campaign with --prior-from, else a plain one; CommandError for what the services refuse."""
        try:
            if options["prior_from"]:
                cheap_model = ProbeModel.objects.filter(name=options["prior_from"]).first()
                if cheap_model is None:
                    raise CommandError(f"No probe model {options['prior_from']!r}.")
                if options["policy"] != "adaptive":
                    raise CommandError("--prior-from needs --policy adaptive.")
                campaign = services.campaign_start_ladder(
                    environment=environment,
                    probe_model=probe_model,
                    cheap_model=cheap_model,
                    created_by=user,
                    rollouts=options["rollouts"] or 256,
                    round_size=options["round_size"],
                    confidence=options["confidence"],
                    seed=options["seed"],
                    task_versions=versions,
                    enqueue=not options["inline"],
                )
            else:
                campaign = services.campaign_start(
                    environment=environment,
                    probe_model=probe_model,
                    created_by=user,
                    policy=options["policy"],
                    rollouts=options["rollouts"] or (256 if options["policy"] == "adaptive" else 8),
                    round_size=options["round_size"],
                    confidence=options["confidence"],
                    seed=options["seed"],
                    task_versions=versions,
                    enqueue=not options["inline"],
                    max_new_tokens=options["max_new_tokens"],
                )
        except ServiceError as error:
            raise CommandError(str(error)) from None
        return campaign

    def _wait(self, campaign) -> None:
        """Show the queued campaign's progress until the workers finish it (or it is cancelled)."""
        while True:
            campaign.refresh_from_db()
            progress = selectors.campaign_progress(campaign=campaign)
            self._show_progress(progress["items_done"], progress["items_total"])
            if campaign.status in (Campaign.Status.DONE, Campaign.Status.CANCELLED):
                break
            time.sleep(1)
        self.stdout.write("")

    def _show_progress(self, done: int, total: int) -> None:
        if sys.stdout.isatty():
            self.stdout.write("\r" + progress_bar(done, total), ending="")
        self.stdout.flush()

    def _print_table(self, campaign: Campaign) -> None:
        progress = selectors.campaign_progress(campaign=campaign)
        self.stdout.write(f"{'band':<12}{'tasks':>8}")
        for band, count in selectors.campaign_band_table(campaign=campaign):
            self.stdout.write(f"{band:<12}{count:>8}")
        self.stdout.write(
            f"rollouts {progress['stored']} (pass {progress['passed']}, fail {progress['failed']}), "
            f"verifier errors {progress['verifier_errors']}, world failures {progress['world_errors']}, "
            f"generation errors {progress['generation_errors']}, "
            f"cost ${progress['cost']:.4f}"
        )
