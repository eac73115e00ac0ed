from django.core.management.base import BaseCommand, CommandError

from curation.errors import CurationError
from curation.judge_master_keys import judge_master_keys_run
from engine.verifiers import master_keys


class Command(BaseCommand):
    help = "Attack a registered judge's tasks with the master-key battery and record its false-pass rate and bound."

    def add_arguments(self, parser):
        parser.add_argument("judge", help="A judge registered in PASSBAND_JUDGES.")
        parser.add_argument("--sample", type=int, default=master_keys.SAMPLE, help="Tasks to attack (default 20).")

    def handle(self, *args, judge: str, sample: int, **options):
        try:
            run = judge_master_keys_run(judge=judge, sample=sample)
        except CurationError as error:
            raise CommandError(str(error)) from None
        verdict = "above the limit: it may not score campaigns" if run.above_limit else "within the limit"
        self.stdout.write(
            f"judge {judge}: {run.false_passes} false passes in {run.trials} attacks on {run.tasks} tasks "
            f"({run.errors} without a verdict); upper {run.level:.0%} bound {run.upper_bound:.4f}, {verdict}."
        )
