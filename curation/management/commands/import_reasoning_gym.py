from django.core.management.base import BaseCommand, CommandError

from curation.management.commands._import_common import (
    add_destination_arguments,
    add_no_audit_argument,
    import_environment,
    import_owner,
    import_task_dicts,
    json_object_option,
)
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
        add_destination_arguments(parser)
        parser.add_argument("--config", default="{}", help='The generator\'s config as JSON, e.g. {"max_terms": 3}.')
        parser.add_argument("--seed", type=int, default=0, help="The generator's seed (default 0).")
        parser.add_argument("--size", type=int, default=20, help="Tasks to generate (per level with --curriculum).")
        parser.add_argument("--curriculum", action="store_true", help="Sweep the generator's curriculum levels.")
        parser.add_argument(
            "--attribute", action="append", default=[], help="With --curriculum: sweep only this one (repeatable)."
        )
        add_no_audit_argument(parser)

    def handle(self, *args, generator, environment, create, owner, config, seed, size, curriculum, **options):
        generator_config = json_object_option(config, option="--config", what="the generator's config fields")
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
        import_task_dicts(
            self,
            environment=import_environment(environment, create=create, domain="reasoning", default_verifier=None),
            owner=user,
            filename=f"reasoning-gym-{generator}.jsonl",
            tasks=tasks,
            run_audits=not options["no_audit"],
        )
