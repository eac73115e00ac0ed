"""Every change of who may do what, and every secret-bearing change, is in the audit log with who, when,
before and after, whichever path made it (accounts.audit_changes): the admin (staff and superuser flags,
groups, a token un-revoked or given scopes), a page, a command or a bare QuerySet.update() (no signal);
remote servers registered or moved and probe models' endpoint and key variable alike.

bob reviews, sam is staff (made superuser here to use the admin).
"""

import pytest
from django.contrib.auth.models import Group, Permission
from django.core.management import call_command
from django.urls import reverse

from accounts.models import ApiToken, AuditEvent
from accounts.services import api_token_create, api_token_revoke
from calibration.models import ProbeModel
from curation.models import McpServer

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin(client, staff):
    staff.is_superuser = True
    staff.save()
    client.force_login(staff)
    return client


def last(action: str, **lookups) -> AuditEvent:
    return AuditEvent.objects.filter(action=action, **lookups).order_by("-id").first()


def user_form(client, user, **changes) -> dict:
    form = client.get(reverse("admin:auth_user_change", args=[user.pk])).context["adminform"].form
    data = {
        "username": user.username,
        "is_active": "on",
        "groups": list(user.groups.values_list("pk", flat=True)),
        "date_joined_0": form.initial["date_joined"].strftime("%Y-%m-%d"),
        "date_joined_1": form.initial["date_joined"].strftime("%H:%M:%S"),
    }
    return {**data, **changes}


def test_making_a_user_staff_and_superuser_in_the_admin_is_recorded(admin, staff, bob):
    url = reverse("admin:auth_user_change", args=[bob.pk])
    response = admin.post(url, user_form(admin, bob, is_staff="on", is_superuser="on"))
    assert response.status_code == 302
    event = last("user_change", object_id=bob.pk)
    assert event.actor == staff and event.detail["via"] == "admin"
    assert event.detail["before"] == {"is_staff": False, "is_superuser": False}
    assert event.detail["after"] == {"is_staff": True, "is_superuser": True}


def test_groups_and_permissions_changed_in_the_admin_are_one_event_each(admin, staff, bob):
    leads = Group.objects.get_or_create(name="leads")[0]
    permission = Permission.objects.get(codename="change_apitoken")
    url = reverse("admin:auth_user_change", args=[bob.pk])
    response = admin.post(url, user_form(admin, bob, groups=[leads.pk], user_permissions=[permission.pk]))
    assert response.status_code == 302
    (roles,) = AuditEvent.objects.filter(action="role_change", actor=staff)
    assert roles.detail == {"added": ["leads"], "removed": ["reviewers"], "before": ["reviewers"], "after": ["leads"]}
    (permissions,) = AuditEvent.objects.filter(action="permission_change", actor=staff)
    assert permissions.detail["added"] == ["accounts.change_apitoken"] and permissions.detail["via"] == "admin"


def test_group_changes_from_the_group_s_side_and_outside_any_request_are_recorded(bob):
    leads = Group.objects.get_or_create(name="leads")[0]
    leads.user_set.add(bob)  # a shell or a data migration: no request, so the system acted
    event = last("role_change", object_id=bob.pk)
    assert event.actor is None and event.detail["via"] == "system"
    assert event.detail["added"] == ["leads"] and event.detail["after"] == ["leads", "reviewers"]
    leads.user_set.clear()
    assert last("role_change", object_id=bob.pk).detail["removed"] == ["leads"]
    leads.permissions.add(Permission.objects.get(codename="change_mcpserver"))
    assert last("group_permission_change", object_id=leads.pk).detail["added"] == ["curation.change_mcpserver"]


def test_a_bare_queryset_update_of_a_flag_is_recorded(bob, django_user_model):
    django_user_model.objects.filter(pk=bob.pk).update(is_superuser=True)
    event = last("user_change", object_id=bob.pk)
    assert event.detail["before"] == {"is_superuser": False} and event.detail["after"] == {"is_superuser": True}
    Group.objects.get(name="reviewers").user_set.update(is_staff=True)  # a related manager too
    assert last("user_change", object_id=bob.pk).detail["after"] == {"is_staff": True}


def test_a_password_change_is_recorded_without_the_hash(bob):
    bob.set_password("new-password")
    bob.save()
    event = last("user_change", object_id=bob.pk)
    assert event.detail["before"] == {"password": "(changed)"} and event.detail["after"] == {"password": "(changed)"}
    assert bob.password not in str(AuditEvent.objects.values_list("detail", flat=True))


def test_un_revoking_or_widening_a_token_in_the_admin_is_recorded(admin, staff, bob):
    token, _ = api_token_create(user=bob, name="ci", scopes=["read"])
    api_token_revoke(token=token)
    url = reverse("admin:accounts_apitoken_change", args=[token.pk])
    data = {"user": bob.pk, "name": "ci", "scopes": '["read", "curate"]', "expires_at_0": "", "expires_at_1": ""}
    data |= {"revoked_at_0": "", "revoked_at_1": "", "last_used_at_0": "", "last_used_at_1": ""}
    response = admin.post(url, data)
    assert response.status_code == 302, response.content.decode()[:2000]
    assert ApiToken.objects.get(pk=token.pk).revoked_at is None
    event = last("apitoken_change", object_id=token.pk)
    assert event.actor == staff and event.detail["via"] == "admin"
    assert event.detail["before"]["revoked_at"] is not None and event.detail["after"]["revoked_at"] is None
    assert event.detail["before"]["scopes"] == ["read"] and event.detail["after"]["scopes"] == ["read", "curate"]
    assert "token_hash" not in event.detail["after"]
    ApiToken.objects.filter(pk=token.pk).update(revoked_at=None, scopes=["read", "export"])
    assert last("apitoken_change", object_id=token.pk).detail["after"] == {"scopes": ["read", "export"]}


def test_the_token_page_and_command_record_one_event_each(client, bob, capsys):
    client.force_login(bob)
    client.post("/tokens/", {"name": "page", "scopes": ["read"], "expires_in_days": "30"})
    token = ApiToken.objects.get(name="page")
    client.post(f"/tokens/{token.pk}/revoke/")
    actions = list(AuditEvent.objects.filter(object_kind="apitoken").values_list("action", flat=True).order_by("id"))
    assert actions == ["token_create", "token_revoke"]
    assert last("token_revoke").detail["before"] == {"revoked_at": None}
    call_command("create_api_token", "bob", "--name", "cli", "--scopes", "read")
    assert last("token_create").detail["name"] == "cli"


def test_registering_or_moving_a_remote_server_is_recorded(admin, staff):
    server = McpServer.objects.create(name="tools", url="http://tools.example/mcp", api_key_env="TOOLS_KEY")
    event = last("mcpserver_create", object_id=server.pk)
    assert (
        event.detail["after"]["url"] == "http://tools.example/mcp"
        and event.detail["after"]["api_key_env"] == "TOOLS_KEY"
    )
    McpServer.objects.filter(pk=server.pk).update(url="http://other.example/mcp", api_key_env="OTHER_KEY")
    event = last("mcpserver_change", object_id=server.pk)
    assert event.detail["before"] == {"url": "http://tools.example/mcp", "api_key_env": "TOOLS_KEY"}
    assert event.detail["after"] == {"url": "http://other.example/mcp", "api_key_env": "OTHER_KEY"}
    server.delete()
    assert last("mcpserver_delete").detail["before"]["url"] == "http://other.example/mcp"


def test_a_probe_model_s_endpoint_and_key_changes_are_recorded(admin, staff):
    model = ProbeModel.objects.create(
        name="remote", backend="openai", base_url="http://gpu.example/v1", api_key_env="GPU_KEY"
    )
    assert last("probemodel_create", object_id=model.pk).detail["after"]["base_url"] == "http://gpu.example/v1"
    model.base_url, model.api_key_env = "http://elsewhere.example/v1", "OTHER_KEY"
    model.save()
    event = last("probemodel_change", object_id=model.pk)
    assert event.detail["before"] == {"base_url": "http://gpu.example/v1", "api_key_env": "GPU_KEY"}
    assert event.detail["after"] == {"base_url": "http://elsewhere.example/v1", "api_key_env": "OTHER_KEY"}
    url = reverse("admin:calibration_probemodel_change", args=[model.pk])
    form = admin.get(url).context["adminform"].form
    data = {name: value for name, value in form.initial.items() if value is not None and not isinstance(value, list)}
    # The endpoint and key are read-only in the admin (they change only through the service, which holds them
    # to the outbound policy); what the admin may change is recorded with its actor.
    data |= {"stop": "[]", "base_url": "http://admin.example/v1", "max_new_tokens": 77}
    response = admin.post(url, data)
    assert response.status_code == 302, response.content.decode()[:3000]
    model.refresh_from_db()
    assert model.base_url == "http://elsewhere.example/v1"
    event = last("probemodel_change", object_id=model.pk)
    assert event.actor == staff and event.detail["via"] == "admin"
    assert event.detail["after"] == {"max_new_tokens": 77}
