"""A real S3-compatible server for the storage tests: moto's server (`moto[server]`) in its own process on
127.0.0.1, spoken to over HTTP by boto3 exactly as a bucket elsewhere would be. Nothing is shared with the test
process but the port."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx

from tests.support.llama_server import free_port

# moto accepts any credentials; these only have to be present for boto3's chain.
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "passband-test", "AWS_SECRET_ACCESS_KEY": "passband-test-secret"}
REGION = "us-east-1"


@contextmanager
def s3_server() -> Iterator[str]:
    """Start the server; yields its endpoint URL (http://127.0.0.1:PORT) and stops it afterwards."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(url + "/moto-api/", timeout=2)
                break
            except httpx.HTTPError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the S3 test server (moto) did not start") from None
                time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def storage_settings(*, endpoint: str, bucket: str) -> dict:
    """The environment that makes Passband (settings.py) keep its files in `bucket` at `endpoint`."""
    return {
        "PASSBAND_STORAGE": "s3",
        "PASSBAND_S3_ENDPOINT_URL": endpoint,
        "PASSBAND_S3_BUCKET": bucket,
        "PASSBAND_S3_REGION": REGION,
        **CREDENTIALS,
    }
