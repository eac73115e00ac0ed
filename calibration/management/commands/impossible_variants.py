import json
import time

from django.core.management.base import BaseCommand, CommandError

from calibration import selectors, services
from calibration.errors import CalibrationError
from calibration.models import ProbeModel, VariantProbe
from calibration.services import impossible_variants
from curation.models import Environment, Task


class Command(BaseCommand):
    help = (
        "Probe impossible variants of a sample of an environment's tasks (or of one task): tasks no honest answer "
        "can pass, sampled with the probe model's campaign settings and graded by the variant. Prints the verifier's "
        "false-pass rate under the policy per probe model, its upper 95% bound, found hacks and broken variants; "
        "exits 1 when a variant was passed."
    )

    def add_arguments(self, parser):
        parser.add_argument("--environment", required=True, help="Environment name.")
        parser.add_argument("--sample", type=int, default=impossible_variants.SAMPLE, help="Tasks to probe.")
        parser.add_argument("--task", help="Only this task (its key).")
        parser.add_argument("--model", help="Probe model name (default: the environment's latest campaign's).")
        parser.add_argument("--rollouts", type=int, default=impossible_variants.ROLLOUTS, help="Attempts a variant.")
        parser.add_argument("--seed", type=int)
        mode = parser.add_mutually_exclusive_group()
        mode.add_argument("--wait", action="store_true", help="Queue to the workers and wait until done.")
        mode.add_argument("--inline", action="store_true", help="Run in this process, with no broker.")
        parser.add_argument("--json", dest="as_json", action="store_true", help="Print the result as JSON.")

    def handle(self, *args, **options):
        environment = Environment.objects.filter(name=options["environment"]).first()
        if environment is None:
            raise CommandError(f"No environment named {options['environment']!r}.")
        task = None
        if options["task"]:
            task = Task.objects.filter(environment=environment, key=options["task"]).first()
            if task is None:
                raise CommandError(f"No task {options['task']!r} in {environment.name}.")
        model = self._model(options["model"], environment)
        try:
            probe = services.variant_probe_start(
                environment=environment,
                probe_model=model,
                created_by=None,
                sample=options["sample"],
                task=task,
                rollouts=options["rollouts"],
                seed=options["seed"],
                enqueue=not options["inline"],
            )
        except CalibrationError as error:
            raise CommandError(str(error)) from None
        if options["inline"]:
            probe = services.variant_probe_run(probe_id=probe.pk)
        elif options["wait"]:
            probe = self._wait(probe)
        else:
            self.stdout.write(f"Queued impossible-variant probe {probe.pk}; the workers will run it (or use --wait).")
            return
        self._report(environment, probe, as_json=options["as_json"])

    def _model(self, name: str | None, environment: Environment) -> ProbeModel:
        model = ProbeModel.objects.filter(name=name).first() if name else selectors.default_probe_model(environment)
        if model is None:
            raise CommandError(f"No probe model {name!r}." if name else "No probe model registered: add one first.")
        return model

    def _wait(self, probe: VariantProbe) -> VariantProbe:
        while probe.status == VariantProbe.Status.RUNNING:
            time.sleep(1.0)
            probe.refresh_from_db()
        if probe.status == VariantProbe.Status.FAILED:
            raise CommandError(f"Impossible-variant probe {probe.pk} failed: {probe.error}")
        return probe

    def _report(self, environment: Environment, probe: VariantProbe, *, as_json: bool) -> None:
        rows = [  # the operator sees every task
            row
            for row in selectors.false_pass_rates(environment=environment, user=None)
            if row["probe_model"] == probe.probe_model.name
        ]
        if as_json:
            self.stdout.write(json.dumps(rows, indent=2, default=str))
        for row in [] if as_json else rows:
            bound = row["upper_bound"]
            self.stdout.write(
                f"{environment.name} × {row['probe_model']}: {row['false_passes']} of {row['trials']} attempts passed "
                f"an impossible variant ({row['variants']} variant(s); upper {row['level']:.0%} bound "
                f"{'n/a' if bound is None else f'{bound:.3f}'}); {row['broken_variants']} broken, "
                f"{row['not_derivable']} not derivable."
            )
            for hack in row["found_hacks"]:
                self.stdout.write(
                    f"  found hack: {hack['task']} v{hack['version']} ({hack['verifier_kind']}): {hack['change']}"
                )
            for broken in row["broken"]:
                self.stdout.write(f"  broken variant: {broken['task']} v{broken['version']}: {broken['reason']}")
        if any(row["false_passes"] for row in rows):
            raise SystemExit(1)
