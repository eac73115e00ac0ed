from django.core.management.base import BaseCommand, CommandError

from accounts.errors import ServiceError
from calibration import services
from engine.backends.openai_servers import SERVER_KINDS, TOOL_MODES


class Command(BaseCommand):
    help = "Register a probe model (transformers in process, or an OpenAI-compatible server)."

    def add_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument("--backend", required=True, choices=["transformers", "openai"])
        parser.add_argument(
            "--model", default="", help="Model id, or a Hugging Face model directory (default: embedded SmolLM2)."
        )
        parser.add_argument("--revision", default="")
        parser.add_argument(
            "--base-url", default="", help="Server URL for the openai backend, e.g. http://gpu-1:8000/v1"
        )
        parser.add_argument("--api-key-env", default="", help="Name of the environment variable holding the API key.")
        parser.add_argument("--temperature", type=float, default=0.7)
        parser.add_argument("--top-p", type=float, default=0.95)
        parser.add_argument("--max-new-tokens", type=int, default=256)
        parser.add_argument("--stop", action="append", default=[], help="A stop string (repeatable).")
        parser.add_argument("--usd-per-gpu-hour", type=float, default=0)
        parser.add_argument("--gpus", type=int, default=1)
        parser.add_argument("--usd-per-million-input-tokens", type=float, default=0)
        parser.add_argument("--usd-per-million-output-tokens", type=float, default=0)
        parser.add_argument(
            "--samples-per-request",
            type=int,
            default=1,
            help="openai: send up to this many consecutive seeds as one request (n); only for servers that "
            "seed choice i with seed + i, as vLLM does.",
        )
        parser.add_argument(
            "--server",
            default="vllm",
            choices=list(SERVER_KINDS),
            help="openai: the kind of server, which decides what is asked for exact capture (see the README).",
        )
        parser.add_argument("--endpoint", default="chat", choices=["chat", "completions"])
        parser.add_argument("--timeout", type=float, default=120.0, help="openai: seconds per request.")
        parser.add_argument("--max-concurrency", type=int, default=16, help="openai: requests in flight.")
        parser.add_argument(
            "--tool-mode", default="", choices=["", *TOOL_MODES], help="Tool-use episodes: native or text."
        )
        parser.add_argument("--run", default="", help="The training run this model is a checkpoint of.")
        parser.add_argument("--checkpoint-step", type=int, default=None, help="The checkpoint's training step.")
        parser.add_argument(
            "--strong", action="store_true", help="A strong model: 0 passes on an audited task flags it for review."
        )

    def handle(self, *args, **options):
        try:
            model = services.probe_model_add(
                name=options["name"],
                backend=options["backend"],
                model=options["model"],
                revision=options["revision"],
                base_url=options["base_url"],
                api_key_env=options["api_key_env"],
                temperature=options["temperature"],
                top_p=options["top_p"],
                max_new_tokens=options["max_new_tokens"],
                stop=options["stop"],
                usd_per_gpu_hour=options["usd_per_gpu_hour"],
                gpus=options["gpus"],
                usd_per_million_input_tokens=options["usd_per_million_input_tokens"],
                usd_per_million_output_tokens=options["usd_per_million_output_tokens"],
                strong=options["strong"],
                samples_per_request=options["samples_per_request"],
                server=options["server"],
                endpoint=options["endpoint"],
                timeout_s=options["timeout"],
                max_concurrency=options["max_concurrency"],
                tool_mode=options["tool_mode"],
                run=options["run"],
                checkpoint_step=options["checkpoint_step"],
            )
        except ServiceError as error:
            raise CommandError(str(error)) from None
        self.stdout.write(self.style.SUCCESS(f"Probe model {model.name} ({model.backend}) added."))
