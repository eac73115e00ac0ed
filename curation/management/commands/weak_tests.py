import json

from django.core.management.base import BaseCommand, CommandError

from curation import weak_tests
from curation.models import Environment, Task
from engine.verifiers import mutation


class Command(BaseCommand):
    help = (
        "Run the weak-test check over an environment's code tasks: mutants of each reference solution (at most "
        f"{mutation.MUTANTS} a task by default) graded by the task's own tests in the sandbox. Stores the share "
        "that survived on each version (and its quality card); exits 1 when a task is flagged."
    )

    def add_arguments(self, parser):
        parser.add_argument("--environment", required=True, help="Environment name.")
        parser.add_argument("--task", action="append", default=[], help="Only this task key (repeatable).")
        parser.add_argument("--mutants", type=int, help="At most this many mutants a task (1-200).")
        parser.add_argument("--json", dest="as_json", action="store_true", help="Print the report as JSON.")

    def handle(self, *args, environment: str, task: list[str], mutants: int | None, as_json: bool, **options):
        found = Environment.objects.filter(name=environment).first()
        if found is None:
            raise CommandError(f"No environment named {environment!r}.")
        if mutants is not None and not 1 <= mutants <= 200:
            raise CommandError(f"--mutants must lie between 1 and 200; got {mutants}.")
        tasks = Task.objects.filter(key__in=task) if task else None
        report = weak_tests.environment_weak_tests_check(environment=found, tasks=tasks, mutants=mutants)
        if as_json:
            self.stdout.write(json.dumps(report.as_dict(), indent=2, ensure_ascii=False))
        else:
            self.stdout.write(
                f"{report.environment}: {report.checked:,} code task(s) checked, {len(report.flagged):,} flagged "
                f"for weak tests, {len(report.not_run):,} not run."
            )
            for flagged in report.flagged:
                self.stdout.write(
                    f"  {flagged['task']} (version {flagged['version']}): "
                    + weak_tests.weak_tests_flag(flagged["weak_tests"])
                )
                for label in flagged["weak_tests"]["survivors"]:
                    self.stdout.write(f"    survived: {label}")
            for line in report.not_run:
                self.stdout.write(f"  not run: {line}")
        if report.flagged:
            raise SystemExit(1)
