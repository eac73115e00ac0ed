"""The outbound policy (engine/outbound) against real listeners on loopback: a stand-in for the cloud
metadata service reached in every address form, a redirecting server, a stalling server, and secrets
that go only to the origins they are declared for, through every client that leaves the server."""

import ipaddress

import httpx
import pytest

from engine import outbound
from engine.backends import SamplingParams
from engine.backends.openai_backend import OpenAIBackend
from engine.backends.openai_transport import FinalError
from engine.episodes.remote_mcp import McpServerConfig, McpUnavailable, McpWorld
from engine.episodes.remote_openenv import OpenEnvServerConfig, OpenEnvWorld, RemoteUnavailable
from engine.verifiers import configure, verify
from tests.support.hostile_servers import MetadataListener, Recorder, Redirector, Staller
from tests.support.outbound import outbound_policy

# 127.0.0.1 spelled every way a URL can spell it, and the metadata address itself.
LOOPBACK_FORMS = [
    "127.0.0.1",
    "2130706433",
    "0x7f000001",
    "0177.0.0.1",
    "127.1",
    "[::ffff:127.0.0.1]",
    "[::ffff:7f00:1]",
    "[64:ff9b::7f00:1]",
    "[2002:7f00:1::]",
    "[::127.0.0.1]",
    "localhost",
    "127.0.0.1.",
    "LocalHost.",
]
# httpx itself refuses some spellings (0177.0.0.1) as invalid URLs: refused either way, nothing connects.
REFUSED = (outbound.OutboundRefused, httpx.InvalidURL)
MESSAGES = [{"role": "user", "content": "hi"}]
PARAMS = SamplingParams(temperature=0.0, max_new_tokens=8)


@pytest.fixture
def metadata():
    with MetadataListener() as listener:
        yield listener


def test_the_metadata_stand_in_is_refused_in_every_address_form(metadata):
    with outbound_policy(allowed_hosts=""), outbound.http_client(timeout_s=2) as client:
        for form in [*LOOPBACK_FORMS, "169.254.169.254"]:
            with pytest.raises(REFUSED):
                client.get(f"http://{form}:{metadata.port}/latest/meta-data/iam/security-credentials/")
    assert metadata.connections == 0
    # The same client reaches it once the operator allows the host: the listener counts what arrives.
    with outbound_policy(allowed_hosts="127.0.0.1"), outbound.http_client(timeout_s=2) as client:
        assert client.get(f"{metadata.url}/latest/meta-data/").status_code == 200
    assert metadata.connections == 1


def test_allowing_a_host_allows_it_only_as_written(metadata):
    # The test environment allows 127.0.0.1 (the suite's own servers); no other spelling of it.
    with outbound.http_client(timeout_s=2) as client:
        for form in LOOPBACK_FORMS[1:]:
            with pytest.raises(REFUSED):
                client.get(f"http://{form}:{metadata.port}/")
    assert metadata.connections == 0


@pytest.mark.parametrize("form", [*LOOPBACK_FORMS, "169.254.169.254", "[fe80::1]", "10.0.0.7", "[fd00:ec2::254]"])
def test_a_registration_refuses_non_global_hosts_without_a_lookup(form):
    with outbound_policy(allowed_hosts=""):
        assert "is refused" in outbound.url_problem(f"http://{form}:8000/mcp")


@pytest.mark.parametrize(
    ("address", "allowed"),
    [
        ("8.8.8.8", True),
        ("2606:4700:4700::1111", True),
        ("64:ff9b::808:808", True),  # NAT64 of a global address
        ("::ffff:127.0.0.1", False),
        ("64:ff9b::7f00:1", False),
        ("64:ff9b::a9fe:a9fe", False),  # NAT64 of 169.254.169.254
        ("2002:a9fe:a9fe::", False),  # 6to4 of 169.254.169.254
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", False),  # Teredo
        ("100.64.0.1", False),  # shared address space
        ("0.0.0.0", False),
        ("224.0.0.1", False),
    ],
)
def test_addresses_are_judged_after_unwrapping_the_ipv4_they_carry(address, allowed):
    assert (outbound.address_problem(ipaddress.ip_address(address)) == "") is allowed


def test_every_client_refuses_the_metadata_stand_in(metadata):
    hidden = f"http://2130706433:{metadata.port}"
    backend = OpenAIBackend(base_url="http://127.0.0.1:9/v1", model="m", max_retries=0)
    try:
        with pytest.raises(FinalError, match="outbound policy"):
            backend.post(url=f"{hidden}/v1/chat/completions", body={})
    finally:
        backend.close()
    with pytest.raises(ValueError, match="is refused"):
        OpenAIBackend(base_url=f"{hidden}/v1", model="m")
    configure(judges={"inside": {"base_url": f"{hidden}/v1", "model": "m"}})
    try:
        verdict = verify(verifier={"kind": "llm_judge", "judge": "inside", "rubric": "r"}, completion="x")
    finally:
        configure(judges={})
    assert verdict.outcome == "error" and "outbound policy" in verdict.detail
    with pytest.raises(McpUnavailable) as refused:
        McpWorld(
            config=McpServerConfig(name="inside", url=f"http://localhost:{metadata.port}/mcp", timeout_s=5)
        ).__enter__()
    assert refused.value.reason == "refused"
    config = OpenEnvServerConfig(name="inside", url=f"http://[::ffff:127.0.0.1]:{metadata.port}", timeout_s=5)
    with pytest.raises(RemoteUnavailable) as refused:
        OpenEnvWorld(config=config, fresh_schema=True).__enter__()
    assert refused.value.reason == "refused"
    with pytest.raises(outbound.OutboundRefused):
        outbound.open_socket("localhost", metadata.port)  # the socket OpenEnv's /ws session runs on
    assert metadata.connections == 0


def test_no_client_follows_a_redirect(metadata):
    with Redirector(to=metadata.url) as redirector:
        with outbound.http_client(timeout_s=5) as client:
            assert client.get(f"{redirector.url}/latest/meta-data/").status_code == 302
        backend = OpenAIBackend(base_url=f"{redirector.url}/v1", model="m", max_retries=0)
        try:
            [generation] = backend.generate(messages=MESSAGES, seeds=[1], params=PARAMS)
        finally:
            backend.close()
        assert generation.finish_reason == "error" and "HTTP 307" in generation.error
        configure(judges={"moved": {"base_url": f"{redirector.url}/v1", "model": "m"}})
        try:
            verdict = verify(verifier={"kind": "llm_judge", "judge": "moved", "rubric": "r"}, completion="x")
        finally:
            configure(judges={})
        assert verdict.outcome == "error" and "HTTP 307" in verdict.detail
        with pytest.raises(McpUnavailable):
            McpWorld(config=McpServerConfig(name="moved", url=f"{redirector.url}/mcp", timeout_s=5)).__enter__()
        # OpenEnv: the schema under a path that redirects, then the /ws handshake that redirects.
        with pytest.raises(RemoteUnavailable, match="redirect, not followed"):
            OpenEnvWorld(
                config=OpenEnvServerConfig(name="moved", url=f"{redirector.url}/env"), fresh_schema=True
            ).__enter__()
        with pytest.raises(RemoteUnavailable, match="/ws"):
            OpenEnvWorld(config=OpenEnvServerConfig(name="moved", url=redirector.url), fresh_schema=True).__enter__()
        assert len(redirector.requests) >= 6
    assert metadata.connections == 0


def test_a_stalling_server_is_cut_by_the_read_timeout():
    with Staller() as staller:
        with outbound.http_client(timeout_s=1) as client, pytest.raises(httpx.ReadTimeout):
            client.get(f"{staller.url}/schema")
        config = OpenEnvServerConfig(name="stalls", url=staller.url, timeout_s=1)
        with pytest.raises(RemoteUnavailable) as cut:
            OpenEnvWorld(config=config, fresh_schema=True).__enter__()
        assert cut.value.reason == "timeout"
        with pytest.raises(McpUnavailable):
            McpWorld(config=McpServerConfig(name="stalls", url=f"{staller.url}/mcp", timeout_s=1)).__enter__()
        assert staller.connections >= 3


@pytest.mark.parametrize("variable", ["SECRET_KEY", "DATABASE_URL", "CELERY_BROKER_URL", "PASSBAND_METRICS_TOKEN"])
def test_the_process_own_configuration_is_never_an_outbound_secret(variable, monkeypatch):
    with pytest.raises(ValueError, match="configures Passband itself"):
        outbound.parse_secrets(f'{{"{variable}": ["https://tools.example.com"]}}')
    monkeypatch.setenv(variable, "the-server-own-secret")
    with Recorder() as recorder:
        with pytest.raises(outbound.OutboundRefused, match="not a declared outbound secret"):
            OpenAIBackend(base_url=f"{recorder.url}/v1", model="m", api_key_env=variable)
    assert recorder.requests == []


def test_a_declared_secret_goes_only_to_its_bound_origin(monkeypatch):
    monkeypatch.setenv("TOOLS_KEY", "tools-secret")
    with Recorder() as bound, Recorder() as other:
        with outbound_policy(secrets={"TOOLS_KEY": [bound.url]}):
            backend = OpenAIBackend(base_url=f"{bound.url}/v1", model="m", api_key_env="TOOLS_KEY", max_retries=0)
            backend.generate(messages=MESSAGES, seeds=[1], params=PARAMS)
            backend.close()
            with pytest.raises(outbound.OutboundRefused, match=f"may be sent only to {bound.url}"):
                OpenAIBackend(base_url=f"{other.url}/v1", model="m", api_key_env="TOOLS_KEY")
            configure(judges={"elsewhere": {"base_url": f"{other.url}/v1", "model": "m", "api_key_env": "TOOLS_KEY"}})
            try:
                verdict = verify(verifier={"kind": "llm_judge", "judge": "elsewhere", "rubric": "r"}, completion="x")
            finally:
                configure(judges={})
    assert bound.requests[0]["authorization"] == "Bearer tools-secret"
    assert verdict.outcome == "error" and "may be sent only to" in verdict.detail
    assert other.requests == []
