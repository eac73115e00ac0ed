"""Change the status of many tasks at once: submit them for review, or approve, reject or send back."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from calibration.models import Band
from curation.errors import CurationError
from curation.models import TaskStatus
from releases import task_filters
from review import services as review_services


class Command(BaseCommand):
    help = (
        "Submit tasks for review (as an author: own tasks) or decide them (as a reviewer), every task of an "
        "environment matching the filters (those of the task list). Each change is audited under --user."
    )

    def add_arguments(self, parser):
        parser.add_argument("action", choices=review_services.BULK_ACTIONS)
        parser.add_argument("--environment", required=True)
        parser.add_argument(
            "--user", required=True, help="Who makes the change (an author to submit, a reviewer to decide)."
        )
        parser.add_argument("--status", choices=TaskStatus.values, default="")
        parser.add_argument("--band", choices=Band.values, default="")
        parser.add_argument("--model", default="", help="The probe model --band refers to (default: the latest used).")
        parser.add_argument(
            "--keys-from", default="", metavar="FILE", help="Only the task keys listed in FILE, one a line."
        )
        parser.add_argument(
            "--flag", choices=task_filters.FLAGS, default="", help="A calibration flag, or audit_failed."
        )
        parser.add_argument("--mine", action="store_true", help="Only tasks --user owns.")
        parser.add_argument("--comment", default="", help="Required to reject or send back.")
        parser.add_argument("--dry-run", action="store_true", help="List the matching tasks; change nothing.")

    def handle(self, *args, **options):
        user = get_user_model().objects.filter(username=options["user"]).first()
        if user is None:
            raise CommandError(f"No user {options['user']!r}.")
        filters = {name: options[name] for name in ("environment", "status", "band", "model", "flag", "mine")}
        try:
            task_filter = task_filters.task_filter_parse(filters, required=("environment",))
        except task_filters.TaskFilterError as error:
            raise CommandError(f"--{error.field}: {error.reason}") from None
        if options["keys_from"]:
            with open(options["keys_from"], encoding="utf-8") as handle:
                task_filter = task_filters.with_keys(task_filter, [line.strip() for line in handle if line.strip()])
        tasks = task_filters.tasks_matching(user=user, task_filter=task_filter)
        if options["dry_run"]:
            keys = list(tasks.values_list("key", flat=True))
            self.stdout.write("\n".join(keys))
            self.stdout.write(f"{len(keys)} task(s) match; nothing changed (--dry-run).")
            return
        try:
            result = review_services.tasks_bulk_action(
                tasks=tasks, user=user, action=options["action"], comment=options["comment"]
            )
        except CurationError as error:
            raise CommandError(str(error)) from None
        for line in result.skipped:
            self.stderr.write(f"skipped {line}")
        self.stdout.write(f"{options['action']}: {len(result.decided)} task(s) changed, {len(result.skipped)} skipped.")
