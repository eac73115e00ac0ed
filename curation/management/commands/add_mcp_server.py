from django.core.management.base import BaseCommand, CommandError

from accounts.errors import ServiceError
from curation import mcp_servers
from curation.models import Environment


class Command(BaseCommand):
    help = (
        "Register a remote environment server, MCP (checked: it must answer and list usable tools) or OpenEnv "
        "(--protocol openenv: its /schema and a /ws session are checked), optionally for an environment."
    )

    def add_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument(
            "--protocol",
            default="mcp",
            help="mcp (default), openenv, or a protocol an installed world provider declares (manage.py environments).",
        )
        parser.add_argument("--url", default="", help="Streamable HTTP endpoint, e.g. http://tools:8000/mcp")
        parser.add_argument("--stdio", default="", help="Or: the name of a stdio server in PASSBAND_MCP_STDIO_SERVERS.")
        parser.add_argument("--api-key-env", default="", help="Environment variable holding a bearer token.")
        parser.add_argument("--max-sessions", type=int, default=8, help="Rollouts in session at once, all workers.")
        parser.add_argument("--timeout", type=float, default=30.0, help="Seconds to connect, and per request.")
        parser.add_argument(
            "--reward-tool", default="grade", help="The tool giving the environment's reward ('' none)."
        )
        parser.add_argument("--environment", default="", help="Run this environment's tool-use episodes on the server.")

    def handle(self, *args, **options):
        environment = None
        if options["environment"]:
            environment = Environment.objects.filter(name=options["environment"]).first()
            if environment is None:
                raise CommandError(f"No environment named {options['environment']!r}.")
        try:
            server = mcp_servers.mcp_server_register(
                name=options["name"],
                url=options["url"],
                stdio=options["stdio"],
                api_key_env=options["api_key_env"],
                max_sessions=options["max_sessions"],
                timeout_s=options["timeout"],
                reward_tool=options["reward_tool"],
                protocol=options["protocol"],
            )
        except ServiceError as error:
            raise CommandError(str(error)) from None
        tools = ", ".join(tool["name"] + (" (reward)" if tool["hidden"] else "") for tool in server.tools)
        self.stdout.write(f"Registered {server.protocol_label} {server.name}: {tools or 'no tools'}.")
        if environment is not None:
            mcp_servers.environment_use_mcp_server(environment=environment, server=server)
            self.stdout.write(f"Episodes of {environment.name} run on {server.name}.")
