"""Staff register remote environment servers (MCP tool servers, OpenEnv environment servers), check
one (the tools it lists now) and give an environment's episodes to one. The services
(curation/mcp_servers.py) hold every rule; secrets stay in settings."""

from django import forms
from django.contrib import messages
from django.db import transaction
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from accounts.errors import ServiceError
from curation import mcp_servers, policy, server_schemas
from curation.models import Environment, McpServer, remote_protocol_labels


def protocol_choices() -> list[tuple[str, str]]:
    """The world providers' remote protocols (Passband's and installed ones), read when the form is built."""
    return list(remote_protocol_labels().items())


class McpServerForm(forms.Form):
    name = forms.SlugField(max_length=80, help_text="Letters, digits, '-' and '_'.")
    protocol = forms.ChoiceField(choices=protocol_choices, initial=McpServer.Protocol.MCP, required=False)
    url = forms.CharField(
        max_length=500,
        required=False,
        help_text="MCP: the streamable HTTP endpoint, e.g. http://tools:8000/mcp; OpenEnv: the app's root URL.",
    )
    stdio = forms.CharField(
        max_length=80, required=False, label="Stdio server", help_text="Or: a name in PASSBAND_MCP_STDIO_SERVERS."
    )
    api_key_env = forms.CharField(
        max_length=100,
        required=False,
        label="API key variable",
        help_text="A variable declared in PASSBAND_OUTBOUND_SECRETS for this server's origin.",
    )
    max_sessions = forms.IntegerField(min_value=1, max_value=1024, initial=8, help_text="Rollouts at once.")
    timeout_s = forms.FloatField(min_value=0.1, max_value=600, initial=30, label="Timeout (s)")
    reward_tool = forms.CharField(max_length=64, required=False, initial="grade", help_text="Blank: none.")

    def clean_protocol(self) -> str:
        return self.cleaned_data.get("protocol") or McpServer.Protocol.MCP


@policy.page("mcp_server_list")
def mcp_server_list(request):
    """The registered servers, their tools and their last check; POST registers one, and a worker
    checks that it answers (never this request: an outside server may stall)."""
    form = McpServerForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            with transaction.atomic():
                server = mcp_servers.mcp_server_register(**form.cleaned_data, created_by=request.user, check=False)
                mcp_servers.mcp_server_check_later(server=server)
        except ServiceError as error:
            form.add_error(None, str(error))
        else:
            messages.success(request, f"Registered {server.name}; a worker is checking it: its answer shows here.")
            return redirect("mcp_server_list")
    servers = McpServer.objects.prefetch_related("environments")
    environments = Environment.objects.order_by("name")
    return render(
        request, "curation/mcp_servers.html", {"form": form, "servers": servers, "environments": environments}
    )


@require_POST
@policy.page("mcp_server_check")
def mcp_server_check(request, name: str):
    """Queue a new check of the server for a worker; the page shows its answer."""
    server = policy.get_for(request.user, policy.CHANGE, McpServer.objects.all(), name=name)
    mcp_servers.mcp_server_check_later(server=server)
    messages.success(request, f"A worker is checking {server.name}: its answer shows here.")
    return redirect("mcp_server_list")


@require_POST
@policy.page("mcp_server_use")
def mcp_server_use(request, name: str):
    """Run an environment's tool-use episodes on this server."""
    server = policy.get_for(request.user, policy.CHANGE, McpServer.objects.all(), name=name)
    environment = policy.get_for(
        request.user, policy.CHANGE, Environment.objects.all(), name=request.POST.get("environment", "")
    )
    mcp_servers.environment_use_mcp_server(environment=environment, server=server)
    messages.success(request, f"Episodes of {environment.name} now run on {server.name}.")
    return redirect("mcp_server_list")


@require_POST
@policy.page("mcp_server_schema_accept")
def mcp_server_schema_accept(request, name: str):
    """Accept the server's tools as it lists them now (after they changed), so waiting rollouts run."""
    server = policy.get_for(request.user, policy.CHANGE, McpServer.objects.all(), name=name)
    try:
        server_schemas.mcp_server_schema_accept_later(server=server, accepted_by=request.user)
        messages.success(
            request, f"{server.name} is being checked; its tools as it lists them now become the accepted ones."
        )
    except ServiceError as error:
        messages.error(request, f"Accepting the tools of {server.name} failed: {error}")
    return redirect("mcp_server_list")
