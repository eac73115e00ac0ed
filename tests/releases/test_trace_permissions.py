"""Who may download a campaign's training traces: trainers and staff (the API's export scope), on the
page and over the API; everyone else is refused, and an unknown campaign or file type is 404."""

import pytest

from accounts.services import api_token_create
from calibration import services
from tests.factories import import_tasks

pytestmark = pytest.mark.django_db


@pytest.fixture
def campaign(arithmetic, alice):
    import_tasks(arithmetic, alice, {"key": "sum", "prompt": "What is 1 + 1?", "answer": "2"})
    model = services.probe_model_add(name="smollm2", backend="transformers")
    return services.campaign_start(environment=arithmetic, probe_model=model, created_by=alice, enqueue=False)


@pytest.mark.parametrize(("user", "status"), [("alice", 403), ("bob", 403), ("charlie", 200), ("staff", 200)])
def test_only_trainers_and_staff_download_traces_from_the_page(client, campaign, request, user, status):
    client.force_login(request.getfixturevalue(user))
    response = client.get(f"/campaigns/{campaign.pk}/traces.jsonl")
    assert response.status_code == status
    if status == 200:
        assert response["Content-Disposition"].endswith(f'campaign-{campaign.pk}-traces.jsonl"')


def test_the_api_needs_the_export_scope(client, campaign, charlie):
    url = f"/api/v1/campaigns/{campaign.pk}/traces.parquet"
    read_only = api_token_create(user=charlie, name="read", scopes=["read"])[1]
    assert client.get(url, HTTP_AUTHORIZATION=f"Bearer {read_only}").status_code == 403
    assert client.get(url).status_code == 401
    export = api_token_create(user=charlie, name="export", scopes=["export"])[1]
    assert client.get(url, HTTP_AUTHORIZATION=f"Bearer {export}").status_code == 200
    assert (
        client.get(f"/api/v1/campaigns/{campaign.pk}/traces.csv", HTTP_AUTHORIZATION=f"Bearer {export}").status_code
        == 404
    )
    assert (
        client.get(
            f"/api/v1/campaigns/{campaign.pk + 99}/traces.jsonl", HTTP_AUTHORIZATION=f"Bearer {export}"
        ).status_code
        == 404
    )
