import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from curation import gameability
from curation.errors import CurationError
from curation.models import Environment, Task


class Command(BaseCommand):
    help = (
        "Run the gameability audit over an environment: every task's verifier against degenerate completions "
        "(empty, the prompt restated, every choice, hedges, a huge output; for code: __eq__ always true, "
        "sys.exit(0), os._exit(0), the prompt's examples special-cased) and the environment's own fixtures. "
        "Stores each verdict on its task; exits 1 when a task is gameable."
    )

    def add_arguments(self, parser):
        parser.add_argument("--environment", required=True, help="Environment name.")
        parser.add_argument("--task", action="append", default=[], help="Only this task key (repeatable).")
        parser.add_argument(
            "--fixtures",
            type=Path,
            help='Set the environment\'s fixtures first from a JSON file: [{"kind": "full_reward", '
            '"completion": "The answer is \\\\boxed{{answer}}"}, ...] (kinds: full_reward, zero_reward, '
            "malformed, determinism).",
        )
        parser.add_argument("--json", dest="as_json", action="store_true", help="Print the report as JSON.")

    def handle(self, *args, environment: str, task: list[str], fixtures: Path | None, as_json: bool, **options):
        found = Environment.objects.filter(name=environment).first()
        if found is None:
            raise CommandError(f"No environment named {environment!r}.")
        if fixtures is not None:
            try:
                raw = _read_json(fixtures)
                gameability.environment_fixtures_set(environment=found, fixtures=raw)
            except CurationError as error:
                raise CommandError(f"{fixtures}: {error}") from None
        tasks = Task.objects.filter(key__in=task) if task else None
        report = gameability.environment_gameability_check(environment=found, tasks=tasks)
        if as_json:
            self.stdout.write(_dumps(report.as_dict()))
        else:
            self._print(report)
        if report.gameable:
            raise SystemExit(1)

    def _print(self, report: gameability.GameabilityReport) -> None:
        self.stdout.write(
            f"{report.environment}: {report.checked:,} task(s) checked, {len(report.gameable):,} gameable, "
            f"{len(report.not_run):,} not run (judges or bad configs)."
        )
        for flagged in report.gameable:
            self.stdout.write(f"  {flagged['task']} (version {flagged['version']}):")
            for finding in flagged["findings"]:
                completion = finding["completion"].replace("\n", "\\n")[:160]
                self.stdout.write(
                    f"    {finding['label']}: expected {finding['expected']}, got {finding['outcome']}"
                    f" ({finding['detail'][:120]}); completion: {completion}"
                )


def _read_json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as error:
        raise CommandError(f"{path}: cannot read it ({error})") from None
    except json.JSONDecodeError as error:
        raise CommandError(f"{path}: line {error.lineno}: not valid JSON ({error.msg})") from None


def _dumps(data) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False)
