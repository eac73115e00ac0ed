from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from curation import imports, services
from curation.errors import CurationError
from curation.models import Environment


class Command(BaseCommand):
    help = "Import a JSONL (or CSV) task file into an environment, all or nothing."

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path)
        parser.add_argument("--environment", required=True, help="Environment name.")
        parser.add_argument("--create", action="store_true", help="Create the environment if it does not exist.")
        parser.add_argument("--domain", default="math", help="Domain of a newly created environment.")
        parser.add_argument("--owner", default="", help="Username that owns the tasks (default: the first superuser).")
        parser.add_argument("--no-audit", action="store_true", help="Skip the reference-answer audits.")

    def handle(
        self, *args, file: Path, environment: str, create: bool, domain: str, owner: str, no_audit: bool, **options
    ):
        if not file.is_file():
            raise CommandError(f"{file}: no such file.")
        users = get_user_model().objects
        user = users.filter(username=owner).first() if owner else users.filter(is_superuser=True).order_by("pk").first()
        if user is None:
            raise CommandError(f"No user {owner!r}." if owner else "No superuser to own the tasks; pass --owner.")
        env = Environment.objects.filter(name=environment).first()
        if env is None:
            if not create:
                raise CommandError(f"No environment {environment!r}; pass --create to make it.")
            try:
                env = services.environment_create(
                    name=environment, domain=domain, default_verifier={"kind": "math"} if domain == "math" else None
                )
            except CurationError as error:
                raise CommandError(f"--environment: {error}") from None
        try:
            report = imports.tasks_import(
                environment=env, owner=user, data=file.read_bytes(), filename=file.name, run_audits=not no_audit
            )
        except imports.ImportRejected as rejected:
            for problem in rejected.report.problems:
                self.stderr.write(str(problem))
            raise CommandError(rejected.report.summary()) from None
        for line in report.duplicates[:10]:
            self.stdout.write(f"duplicate: {line}")
        if len(report.duplicates) > 10:
            self.stdout.write(
                f"… and {len(report.duplicates) - 10} more duplicates (the same content was already there)."
            )
        for line in report.audit_failures:
            self.stdout.write(f"audit failed: {line}")
        self.stdout.write(self.style.SUCCESS(report.summary()))
