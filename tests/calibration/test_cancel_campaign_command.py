"""`manage.py cancel_campaign`: the campaign page's Cancel from the command line, through the same service."""

import pytest
from django.core.management import CommandError, call_command

from calibration import services
from calibration.models import Campaign
from tests.factories import import_tasks

pytestmark = pytest.mark.django_db


def test_a_running_campaign_is_cancelled_and_a_finished_one_refused(arithmetic, alice):
    import_tasks(arithmetic, alice, {"key": "a", "prompt": "Say 42", "answer": "42", "verifier": {"kind": "exact"}})
    model = services.probe_model_add(name="m", backend="openai", base_url="http://127.0.0.1:9/v1", model="m")
    campaign = services.campaign_start(environment=arithmetic, probe_model=model, created_by=alice, enqueue=False)
    call_command("cancel_campaign", str(campaign.pk))
    campaign.refresh_from_db()
    assert campaign.status == Campaign.Status.CANCELLED and campaign.finished_at is not None
    with pytest.raises(CommandError, match="A cancelled campaign cannot become cancelled"):
        call_command("cancel_campaign", str(campaign.pk))
    with pytest.raises(CommandError, match="No campaign #999999"):
        call_command("cancel_campaign", "999999")
