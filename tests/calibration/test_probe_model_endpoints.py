"""A probe model's endpoint and key under the outbound policy: a staff-set base URL pointing inside
(metadata, loopback in any spelling) and a key variable that is the server's own configuration are
refused when the model is registered, by the service, the command, and again on the worker."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from calibration.errors import CalibrationError
from calibration.models import ProbeModel
from calibration.services import probe_model_add
from calibration.services.probe_models import backend_for_probe_model
from engine.outbound import OutboundRefused
from tests.support.hostile_servers import MetadataListener
from tests.support.outbound import outbound_policy


def add(**fields):
    return probe_model_add(**{"name": "probe", "backend": "openai", "model": "m", **fields})


@pytest.mark.django_db
@pytest.mark.parametrize("variable", ["SECRET_KEY", "DATABASE_URL", "UNDECLARED_KEY"])
def test_the_server_own_secrets_are_never_a_probe_model_key(variable):
    with MetadataListener() as listener:
        with pytest.raises(CalibrationError, match=f"api key env: '{variable}' is not a declared outbound secret"):
            add(base_url=f"{listener.url}/v1", api_key_env=variable)
        with pytest.raises(CommandError, match="not a declared outbound secret"):
            call_command(
                "add_probe_model",
                "probe",
                "--backend",
                "openai",
                "--model",
                "m",
                "--base-url",
                f"{listener.url}/v1",
                "--api-key-env",
                variable,
                stdout=StringIO(),
            )
    assert not ProbeModel.objects.exists() and listener.connections == 0


@pytest.mark.django_db
@pytest.mark.parametrize("host", ["169.254.169.254", "2130706433", "[::ffff:127.0.0.1]", "localhost"])
def test_a_base_url_inside_the_deployment_is_refused(host):
    with pytest.raises(CalibrationError, match="base url: the host .* is refused"):
        add(base_url=f"http://{host}:8000/v1")
    assert not ProbeModel.objects.exists()


@pytest.mark.django_db
def test_a_declared_key_is_bound_to_its_origin_and_checked_again_on_the_worker(monkeypatch):
    monkeypatch.setenv("VLLM_KEY", "vllm-secret")
    with outbound_policy(secrets={"VLLM_KEY": ["https://gpu.example.com"]}):
        with pytest.raises(CalibrationError, match="VLLM_KEY may be sent only to https://gpu.example.com:443"):
            add(base_url="https://evil.example.com/v1", api_key_env="VLLM_KEY")
        model = add(base_url="https://gpu.example.com/v1", api_key_env="VLLM_KEY")
        # A row changed behind the service's back (a shell, an old release) gains nothing on the worker.
        ProbeModel.objects.filter(pk=model.pk).update(base_url="https://evil.example.com/v1")
        model.refresh_from_db()
        with pytest.raises(OutboundRefused, match="may be sent only to"):
            backend_for_probe_model(model)
