"""Pages that must not fail the person reading them: the Campaigns list and the probing sign, bulk submit
offered only for what the author can submit, the gameable filter, and approving an unprobed task."""

import pytest
from django.urls import reverse

from calibration.models import Campaign, ProbeModel
from curation.models import Task, TaskStatus, TaskVersion
from tests.factories import import_tasks, math_task

pytestmark = pytest.mark.django_db


def _tasks(arithmetic, owner, *keys):
    import_tasks(
        arithmetic,
        owner,
        *[math_task(key, question=f"What is {i} + 5?", answer=str(i + 5)) for i, key in enumerate(keys)],
    )


def test_the_campaigns_list_and_the_sign_of_a_running_probe(client, alice, arithmetic):
    model = ProbeModel.objects.create(name="probe", backend="openai", base_url="http://127.0.0.1:9/v1")
    running = Campaign.objects.create(environment=arithmetic, probe_model=model, created_by=alice, seed=1)
    done = Campaign.objects.create(environment=arithmetic, probe_model=model, created_by=alice, seed=2, status="done")
    client.force_login(alice)
    page = client.get(reverse("campaign_list")).content.decode()
    assert f'href="/campaigns/{running.pk}/"' in page and f'href="/campaigns/{done.pk}/"' in page
    only_done = client.get(reverse("campaign_list"), {"status": "done"}).content.decode()
    assert f'href="/campaigns/{running.pk}/"' not in only_done
    environments = client.get(reverse("environment_list")).content.decode()
    assert "probing · probe" in environments
    Campaign.objects.filter(pk=running.pk).update(status="cancelled")
    assert "probing · probe" not in client.get(reverse("environment_list")).content.decode()


def test_submit_is_offered_only_for_tasks_the_author_can_submit(client, alice, bob, arithmetic):
    _tasks(arithmetic, alice, "mine-1", "mine-2")
    _tasks(arithmetic, bob, "theirs-1")
    client.force_login(alice)
    page = client.get(reverse("task_list"), {"environment": "arithmetic"}).content.decode()
    assert "Submit for review (2 of these are yours to submit)" in page
    Task.objects.filter(owner=alice).update(status=TaskStatus.SUBMITTED)
    page = client.get(reverse("task_list"), {"environment": "arithmetic"}).content.decode()
    assert "Submit for review" not in page and 'id="bulk-actions"' not in page  # an author with nothing to submit


def test_gameable_tasks_are_a_flag_and_a_filter_in_the_list_and_the_queue(client, alice, bob, arithmetic):
    _tasks(arithmetic, alice, "beaten", "sound", "overridden")
    Task.objects.filter(environment=arithmetic).update(status=TaskStatus.SUBMITTED)
    TaskVersion.objects.filter(task__key="beaten").update(gameable=True)
    TaskVersion.objects.filter(task__key="sound").update(gameable=False)
    TaskVersion.objects.filter(task__key="overridden").update(gameable=True, gameable_override_reason="checked")
    from django.utils import timezone

    TaskVersion.objects.filter(task__key="overridden").update(gameable_override_at=timezone.now())
    client.force_login(bob)
    listed = client.get(reverse("task_list"), {"environment": "arithmetic", "flag": "gameable"}).content.decode()
    assert "beaten" in listed and "sound" not in listed and "overridden" not in listed
    assert 'class="flag flag-gameable"' in listed
    queue = client.get(reverse("review_queue"), {"flag": "gameable"})
    assert queue.context["total"] == 1 and queue.context["task"].key == "beaten"


def test_approving_an_unprobed_task_says_no_release_will_hold_it(client, alice, bob, arithmetic):
    _tasks(arithmetic, alice, "unprobed")
    Task.objects.update(status=TaskStatus.SUBMITTED)
    client.force_login(bob)
    page = client.get(reverse("review_queue")).content.decode()
    assert "unprobed has not been probed: approving it is allowed, but no release will contain it" in page
