import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand

from calibration import demo
from calibration import services as calibration_services
from calibration.models import ProbeModel
from curation import imports, repo_demo, services
from curation.models import Environment
from curation.repo_snapshots import snapshot_store
from engine.backends import model_store
from engine.episodes.backoffice_tasks import backoffice_tasks

ENVIRONMENTS = [
    {
        "name": "arithmetic",
        "title": "Arithmetic word problems",
        "domain": "math",
        "description": "A seeded ladder: one-digit sums up to multi-step word problems.",
        "guidelines": "One question per task, an integer answer, graded by math-verify. "
        "Say in the prompt that the final answer goes on the last line.",
        "default_verifier": {"kind": "math"},
        "tasks": lambda: demo.arithmetic_tasks(),
    },
    {
        "name": "humaneval",
        "title": "HumanEval",
        "domain": "code",
        "description": "The 164 HumanEval problems, graded by running their tests in the code sandbox.",
        "guidelines": "A function signature and docstring; tests call check(entry_point).",
        "default_verifier": {},
        "tasks": lambda: demo.humaneval_tasks(),
    },
    {
        "name": "backoffice",
        "title": "Back-office workflows",
        "domain": "workflow",
        "description": "Tool-use episodes in a small company back office held in SQLite (customers, contacts, "
        "deals, expense reports, policies): lookups up to multi-step updates that must respect the expense policy.",
        "guidelines": "Declare the environment's tools; verify with state_check on the final database, never on "
        "the model's words. The reference answer is the list of tool calls that solves the task.",
        "default_verifier": {},
        "tasks": lambda: backoffice_tasks(),
    },
    {
        "name": "repositories",
        "title": "Repository bug fixes",
        "domain": "code",
        "description": "Bugs injected into the inflection library, SWE-smith style: an issue, the repository, "
        "hidden tests. The model answers with a patch, graded in a fresh copy in the sandbox.",
        "guidelines": "An issue written from the failing behaviour; FAIL_TO_PASS and PASS_TO_PASS test ids; "
        "the reference patch is the answer. See docs/repository-tasks.md.",
        "default_verifier": {},
        "tasks": lambda: repo_demo.task_rows(store=snapshot_store),
        # Each audit runs the 455 tests 13 times (reference, no patch, the tampering battery): minutes for
        # the set, so only with --audit-slow. The suite proves the set (docs/repository-tasks.md).
        "audit": "slow",
    },
    {
        "name": "repository-episodes",
        "title": "Repository bug fixes, with tools",
        "domain": "code",
        "description": "The same bugs as multi-turn episodes: the model lists, reads and searches files, edits them, "
        "applies diffs and runs the tests on its own copy of the repository in the sandbox; its edits are graded.",
        "guidelines": "Declare the repository world's tools; the reference answer is the reference patch. "
        "See docs/repository-tasks.md.",
        "default_verifier": {},
        "tasks": lambda: repo_demo.task_rows(store=snapshot_store, episodes=True),
        "audit": "slow",  # the same snapshots and reference patches as "repositories"
    },
]


class Command(BaseCommand):
    help = "Create the demo admin, the demo environments and the embedded probe model. Safe to run again."

    def add_arguments(self, parser):
        parser.add_argument("--no-audit", action="store_true", help="Skip audits (faster).")
        parser.add_argument("--only", default="", help="Load only this environment.")
        parser.add_argument(
            "--audit-slow",
            action="store_true",
            help="Also audit the repository tasks (minutes: every audit runs tests).",
        )

    def handle(self, *args, no_audit: bool, only: str, audit_slow: bool = False, **options):
        admin = self._demo_admin()
        for spec in ENVIRONMENTS:
            if only and spec["name"] != only:
                continue
            environment = Environment.objects.filter(name=spec["name"]).first()
            if environment is None:
                environment = services.environment_create(
                    **{key: value for key, value in spec.items() if key not in ("tasks", "audit")}
                )
            report = imports.tasks_import(
                environment=environment,
                owner=admin,
                data=demo.as_jsonl(spec["tasks"]()),
                filename=f"{spec['name']}.jsonl",
                run_audits=not no_audit and (spec.get("audit", True) is True or audit_slow),
            )
            self.stdout.write(report.summary())
        self._embedded_probe_model()
        self._print_credentials()

    def _embedded_probe_model(self) -> None:
        """The embedded SmolLM2-135M, registered by its model name and revision so releases can name it."""
        try:
            identity = model_store.model_identity(model=model_store.DEFAULT_MODEL_NAME)
        except model_store.ModelFilesError as error:
            identity = {"model": model_store.DEFAULT_MODEL_NAME, "revision": ""}
            self.stderr.write(f"The embedded model's files are missing ({error}); its revision is left blank.")
        existing = ProbeModel.objects.filter(name="smollm2-135m").first()
        if existing is None:
            calibration_services.probe_model_add(
                name="smollm2-135m",
                backend="transformers",
                model=identity["model"],
                revision=identity["revision"],
                temperature=0.7,
                max_new_tokens=96,
                usd_per_gpu_hour=0.5,  # a CPU-hour, roughly; change it in the admin
            )
            self.stdout.write(f"Probe model smollm2-135m ({identity['model']} {identity['revision']}) added.")
        elif existing.backend == ProbeModel.Backend.TRANSFORMERS and not existing.model and not existing.revision:
            # Registered before it carried its identity: the same weights, now named.
            ProbeModel.objects.filter(pk=existing.pk).update(model=identity["model"], revision=identity["revision"])

    def _demo_admin(self):
        users = get_user_model().objects
        credentials = settings.VAR_DIR / "demo-admin.txt"
        admin = users.filter(username="admin").first()
        if admin is None:
            password = secrets.token_urlsafe(12)
            admin = users.create_superuser("admin", "admin@example.invalid", password)
            admin.groups.add(*Group.objects.filter(name__in=["authors", "reviewers"]))
            credentials.parent.mkdir(parents=True, exist_ok=True)
            credentials.write_text(f"admin {password}\n")
            credentials.chmod(0o600)
        return admin

    def _print_credentials(self) -> None:
        """Last, after every import report: `make run` prints them again once the server answers."""
        credentials = settings.VAR_DIR / "demo-admin.txt"
        if credentials.exists():
            username, password = credentials.read_text().split()
            self.stdout.write(self.style.SUCCESS(f"Demo admin: username {username}, password {password}"))
