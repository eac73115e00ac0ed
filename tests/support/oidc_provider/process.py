"""Start the suite's OpenID Connect provider (serve.py) in its own process, with its own RSA key
(`provider_running` yields its issuer URL), and point Passband's settings at it (`point_passband_at`)."""

import contextlib
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

ROOT = Path(__file__).resolve().parents[3]
CLIENT_ID, CLIENT_SECRET = "passband-test", "secret-for-the-suite-only"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def provider_running(*, folder: Path, people: dict, redirect_uris: list[str]):
    """The provider knows `people` ({"name": {"email", "email_verified", "groups"[, "userinfo_sub"]}}, each
    signing in with password "pw-<name>"; rewrite folder/people.json to change them at the provider) and
    Passband as a client redirecting to `redirect_uris`."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    people_file = folder / "people.json"
    people_file.write_text(json.dumps(people))
    port = free_port()
    env = {
        **os.environ,
        "OIDC_PROVIDER_DB": str(folder / "provider.sqlite3"),
        "OIDC_PROVIDER_KEY": key.decode(),
        "OIDC_PROVIDER_PEOPLE": str(people_file),
        "OIDC_PROVIDER_CLIENT": f"{CLIENT_ID}:{CLIENT_SECRET}",
        "OIDC_PROVIDER_REDIRECT": " ".join(redirect_uris),
        "OIDC_PROVIDER_PORT": str(port),
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.support.oidc_provider.serve"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout.readline().strip() == "ready", "the OIDC provider did not start"
        yield f"http://127.0.0.1:{port}/o"
    finally:
        process.terminate()
        process.wait(timeout=10)


def point_passband_at(settings, issuer: str) -> str:
    """Passband's OIDC settings (pytest-django's `settings`) naming the provider at `issuer`."""
    settings.OIDC_RP_CLIENT_ID, settings.OIDC_RP_CLIENT_SECRET = CLIENT_ID, CLIENT_SECRET
    settings.PASSBAND_OIDC_ISSUER, settings.PASSBAND_OIDC_AUDIENCE = issuer, ""
    settings.OIDC_OP_AUTHORIZATION_ENDPOINT = issuer + "/authorize/"
    settings.OIDC_OP_TOKEN_ENDPOINT = issuer + "/token/"
    settings.OIDC_OP_USER_ENDPOINT = issuer + "/userinfo/"
    settings.OIDC_OP_JWKS_ENDPOINT = issuer + "/.well-known/jwks.json"
    return issuer
