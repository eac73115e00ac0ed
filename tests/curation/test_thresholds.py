"""Threshold validation has one owner (curation.thresholds): the form, both services and the command
refuse the same thresholds with the same message, which names the field to correct."""

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from accounts.errors import ServiceError
from calibration.services import environment_thresholds_set
from curation.models import Environment
from curation.services import environment_create
from curation.thresholds import thresholds_validate

pytestmark = pytest.mark.django_db

BAD = [
    # (floor, retire_at, the field named)
    (0.0, 0.7, "floor"),
    (1.5, 0.7, "floor"),
    (0.5, 0.4, "retire_at"),
    (0.5, 0.5, "retire_at"),
    (0.02, 1.0, "retire_at"),
]


def form_errors(client, user, floor, retire_at) -> dict:
    client.force_login(user)
    response = client.post(
        reverse("environment_create"), {"name": "new", "domain": "math", "floor": floor, "retire_at": retire_at}
    )
    assert response.status_code == 200
    return response.context["form"].errors


@pytest.mark.parametrize(("floor", "retire_at", "field"), BAD)
def test_every_caller_refuses_alike_naming_the_field(client, bob, arithmetic, floor, retire_at, field):
    with pytest.raises(ServiceError) as refused:
        thresholds_validate(floor=floor, retire_at=retire_at)
    message = str(refused.value)
    assert message.startswith(f"{field}: ") and refused.value.field == field
    with pytest.raises(ServiceError) as created:
        environment_create(name="other", domain="math", floor=floor, retire_at=retire_at)
    with pytest.raises(ServiceError) as changed:
        environment_thresholds_set(environment=arithmetic, floor=floor, retire_at=retire_at, by=None)
    with pytest.raises(CommandError) as command:
        call_command("set_thresholds", "arithmetic", "--floor", str(floor), "--retire-at", str(retire_at))
    assert str(created.value) == str(changed.value) == str(command.value) == message
    # The page puts the same message on the field's own row.
    assert form_errors(client, bob, floor, retire_at) == {field: [message]}
    assert not Environment.objects.filter(name__in=["new", "other"]).exists()
    arithmetic.refresh_from_db()
    assert (arithmetic.floor, arithmetic.retire_at) == (0.02, 0.7)


def test_numbers_as_text_are_read_and_anything_else_is_named():
    assert thresholds_validate(floor="0.03", retire_at="0.65") == (0.03, 0.65)
    with pytest.raises(ServiceError, match=r"^floor: must be a number; got 'x'\.$"):
        thresholds_validate(floor="x", retire_at=0.7)
    with pytest.raises(ServiceError, match=r"^retire_at: .*must be a number"):
        thresholds_validate(floor=0.1, retire_at=None)
    with pytest.raises(ServiceError, match=r"^floor: .*must be a number"):
        thresholds_validate(floor=float("nan"), retire_at=0.7)
