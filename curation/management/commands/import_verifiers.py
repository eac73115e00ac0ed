import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from curation import imports
from curation.management.commands._import_common import (
    import_environment,
    import_mapping,
    import_owner,
    rejected,
    write_report,
)
from engine.integrations import verifiers_tasks
from engine.integrations.verifiers_tasks import TasksetError


class Command(BaseCommand):
    help = (
        "Import the tasks of a verifiers 0.4 taskset (an installed package, e.g. vf-word-arithmetic) into an "
        "environment, through the same all-or-nothing import and audits as a task file. Its rows are read by "
        "verifiers' own loader and its @vf.reward methods score every rollout, both in a locked-down helper process."
    )

    def add_arguments(self, parser):
        parser.add_argument("taskset", help="The taskset id, as vf-eval takes it (an installed package).")
        parser.add_argument("--environment", required=True, help="Environment name.")
        parser.add_argument("--create", action="store_true", help="Create the environment if it does not exist.")
        parser.add_argument("--domain", default="general", help="Domain of a newly created environment.")
        parser.add_argument("--owner", default="", help="Username that owns the tasks (default: the first superuser).")
        parser.add_argument(
            "--args",
            dest="taskset_args",
            default="{}",
            help="The taskset's config fields as JSON (vf-eval's --env.taskset.*), e.g. {\"n\": 50}.",
        )
        parser.add_argument("--limit", type=int, default=None, help="Import at most this many rows.")
        parser.add_argument(
            "--reference-format",
            default="{answer}",
            help="The reference answer as a reply the rewards accept, for the audit, e.g. '\\boxed{{answer}}'.",
        )
        parser.add_argument("--timeout-seconds", type=float, default=None, help="Per-score deadline (default 10).")
        parser.add_argument(
            "--mapping", default="", help="A column mapping saved in the environment (with --mapping-file: save it so)."
        )
        parser.add_argument(
            "--mapping-file",
            type=Path,
            help='A column mapping over the rows\' fields as JSON, e.g. {"prompt": "{prompt}", '
            '"answer_column": "solution", "answer_extractor": "after_hashes", "key_column": "key"}.',
        )
        parser.add_argument("--no-audit", action="store_true", help="Skip the reference-answer and gameability audits.")

    def handle(self, *args, taskset, environment, create, domain, owner, limit, **options):
        try:
            taskset_args = json.loads(options["taskset_args"])
        except ValueError as error:
            raise CommandError(f"--args: not JSON ({error})") from None
        if not isinstance(taskset_args, dict):
            raise CommandError("--args: must be a JSON object of the taskset's config fields")
        user = import_owner(owner)
        env = import_environment(environment, create=create, domain=domain, default_verifier=None)
        mapping = import_mapping(env, user, name=options["mapping"], path=options["mapping_file"])
        try:
            loaded = verifiers_tasks.taskset_rows(taskset, args=taskset_args, limit=limit)
        except TasksetError as error:
            raise CommandError(str(error)) from None
        tasks, problems = verifiers_tasks.taskset_tasks(
            loaded,
            mapping=mapping,
            reference_format=options["reference_format"],
            timeout_seconds=options["timeout_seconds"],
        )
        if problems:
            raise rejected(
                self, imports.ImportRejected(imports.ImportReport(filename=loaded.source_name, problems=problems))
            )
        data = b"".join(json.dumps(task, ensure_ascii=False).encode() + b"\n" for task in tasks)
        try:
            report = imports.tasks_import(
                environment=env,
                owner=user,
                filename=f"{verifiers_tasks.key_name(taskset)}.jsonl",
                data=data,
                run_audits=not options["no_audit"],
            )
        except imports.ImportRejected as error:
            raise rejected(self, error) from None
        write_report(self, report)
