from django.core.management.base import BaseCommand, CommandError

from curation import imports
from curation.management.commands._import_common import (
    add_destination_arguments,
    add_mapping_arguments,
    add_no_audit_argument,
    import_environment,
    import_mapping,
    import_owner,
    import_task_dicts,
    json_object_option,
    rejected,
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
        add_destination_arguments(parser, domain="general")
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
        add_mapping_arguments(
            parser,
            example='over the rows\' fields as JSON, e.g. {"prompt": "{prompt}", "answer_column": "solution", '
            '"answer_extractor": "after_hashes", "key_column": "key"}',
        )
        add_no_audit_argument(parser)

    def handle(self, *args, taskset, environment, create, domain, owner, limit, **options):
        taskset_args = json_object_option(options["taskset_args"], option="--args", what="the taskset's config fields")
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
        import_task_dicts(
            self,
            environment=env,
            owner=user,
            filename=f"{verifiers_tasks.key_name(taskset)}.jsonl",
            tasks=tasks,
            run_audits=not options["no_audit"],
        )
