import json

from django.core.management.base import BaseCommand, CommandError

from curation import imports
from curation.management.commands._import_common import import_environment, import_owner, rejected, write_report
from engine.integrations import reasoning_gym_tasks
from engine.integrations.reasoning_gym_tasks import GeneratorError


class Command(BaseCommand):
    help = (
        "Import tasks from a reasoning-gym generator into an environment, through the same all-or-nothing import "
        "and audits as a task file: --size tasks of one --config, or with --curriculum a sweep along the generator's "
        "curriculum (--size tasks per level of each attribute) whose pass rates the dashboard shows per level."
    )

    def add_arguments(self, parser):
        parser.add_argument("generator", help="A reasoning-gym generator, e.g. basic_arithmetic (--list to see all).")
        parser.add_argument("--environment", required=True, help="Environment name.")
        parser.add_argument("--create", action="store_true", help="Create the environment if it does not exist.")
        parser.add_argument("--owner", default="", help="Username that owns the tasks (default: the first superuser).")
        parser.add_argument("--config", default="{}", help='The generator\'s config as JSON, e.g. {"max_terms": 3}.')
        parser.add_argument("--seed", type=int, default=0, help="The generator's seed (default 0).")
        parser.add_argument("--size", type=int, default=20, help="Tasks to generate (per level with --curriculum).")
        parser.add_argument("--curriculum", action="store_true", help="Sweep the generator's curriculum levels.")
        parser.add_argument(
            "--attribute", action="append", default=[], help="With --curriculum: sweep only this one (repeatable)."
        )
        parser.add_argument("--no-audit", action="store_true", help="Skip the reference-answer and gameability audits.")

    def handle(self, *args, generator, environment, create, owner, config, seed, size, curriculum, **options):
        try:
            generator_config = json.loads(config)
        except ValueError as error:
            raise CommandError(f"--config: not JSON ({error})") from None
        if not isinstance(generator_config, dict):
            raise CommandError("--config: must be a JSON object of the generator's config fields")
        if curriculum and generator_config:
            raise CommandError("--config and --curriculum: a sweep sets the config from the curriculum; pass one")
        try:
            if curriculum:
                tasks = reasoning_gym_tasks.curriculum_tasks(
                    generator, size_per_level=size, seed=seed, attributes=options["attribute"]
                )
            else:
                tasks = reasoning_gym_tasks.generated_tasks(generator, config=generator_config, seed=seed, size=size)
        except GeneratorError as error:
            raise CommandError(str(error)) from None
        user = import_owner(owner)
        env = import_environment(environment, create=create, domain="reasoning", default_verifier=None)
        data = b"".join(json.dumps(task, ensure_ascii=False).encode() + b"\n" for task in tasks)
        try:
            report = imports.tasks_import(
                environment=env,
                owner=user,
                filename=f"reasoning-gym-{generator}.jsonl",
                data=data,
                run_audits=not options["no_audit"],
            )
        except imports.ImportRejected as error:
            raise rejected(self, error) from None
        write_report(self, report)
