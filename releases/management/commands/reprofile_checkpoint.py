"""Re-profile an environment's tasks, or a release's, for a new checkpoint of a run.

It lives in releases, not calibration, because --release resolves a release's task versions with the
API's and the dashboard's function (releases.selectors.release_environment_versions), and calibration
sits below releases."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.http import Http404

from accounts.errors import ServiceError
from calibration import services
from calibration.models import ProbeModel
from curation.models import Environment
from releases import selectors


class Command(BaseCommand):
    help = (
        "Re-profile an environment's tasks for a new checkpoint of a run: probe a sample first, then predict the "
        "bands the item-response model is sure of and probe only the uncertain tasks (a worker takes that step "
        "once the sample's campaign is done; running this again takes it at once if it has not run yet)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--environment", required=True)
        parser.add_argument("--model", required=True, help="The new checkpoint (a probe model with a run and step).")
        parser.add_argument(
            "--sample",
            type=int,
            default=50,
            help="Tasks the checkpoint probes before predicting; they also test the model before any band is kept.",
        )
        parser.add_argument("--level", type=float, default=0.95, help="Probe tasks whose band is less probable.")
        parser.add_argument("--rollouts", type=int, default=72, help="Adaptive cap per probed task.")
        parser.add_argument("--seed", type=int, default=None)
        parser.add_argument(
            "--release",
            type=int,
            default=None,
            help="Re-profile only the task versions this release pins (those of the environment); default: the "
            "environment's current tasks.",
        )

    def handle(self, *args, **options):
        environment = Environment.objects.filter(name=options["environment"]).first()
        if environment is None:
            raise CommandError(f"No environment {options['environment']!r}.")
        probe_model = ProbeModel.objects.filter(name=options["model"]).first()
        if probe_model is None:
            raise CommandError(
                f"No probe model {options['model']!r}; add one with add_probe_model --run --checkpoint-step."
            )
        user = get_user_model().objects.filter(is_superuser=True).order_by("pk").first()
        if user is None:
            raise CommandError("Create a superuser first (createsuperuser): campaigns are started in someone's name.")
        task_versions, release = None, options["release"]
        if release is not None:
            try:
                task_versions = selectors.release_environment_versions(
                    user=user, release_id=release, environment=environment
                )
            except Http404:
                raise CommandError(f"No release {release}.") from None
            except ServiceError as error:
                raise CommandError(str(error)) from None
        try:
            result = services.checkpoint_reprofile(
                environment=environment,
                probe_model=probe_model,
                created_by=user,
                task_versions=task_versions,
                release_id=release,
                sample=options["sample"],
                level=options["level"],
                rollouts=options["rollouts"],
                seed=options["seed"],
            )
        except ServiceError as error:
            raise CommandError(str(error)) from None
        if result.stage == "sample":
            self.stdout.write(
                f"Campaign {result.campaign.pk} probes a sample of {result.probed} tasks with {probe_model.name}; "
                f"when it is done, a worker takes the next step by itself (re-profile {result.pk})."
            )
            return
        campaign = f"campaign {result.campaign.pk} probes them" if result.campaign else "nothing to probe"
        self.stdout.write(
            self.style.SUCCESS(
                f"{result.tasks} tasks: {result.predicted} bands predicted (ability {result.ability:.2f} "
                f"± {result.ability_sd:.2f}), {result.probed} uncertain ({campaign})."
            )
        )
