"""An OIDC identity is its issuer and subject. Identities made before carried the subject alone, and a
local account could be linked to one by email: links of accounts created by sign-in (no usable password)
take the configured issuer (PASSBAND_OIDC_ISSUER: set it before migrating, else they keep an empty issuer,
which no sign-in matches, until an admin sets it); links of local accounts (a usable password: linked by
email) are removed, each recorded in the audit log, and their owners link again explicitly (docs/review.md, "Sign-in for organisations")."""

from django.conf import settings
from django.contrib.auth.hashers import is_password_usable
from django.db import migrations, models


def issuer_or_unlink(apps, schema_editor):
    identities = apps.get_model("accounts", "OidcIdentity")
    events = apps.get_model("accounts", "AuditEvent")
    issuer = getattr(settings, "PASSBAND_OIDC_ISSUER", "")
    for identity in identities.objects.select_related("user"):
        if is_password_usable(identity.user.password):
            events.objects.create(
                action="oidc_unlink",
                object_kind="user",
                object_id=identity.user_id,
                object_label=identity.user.username[:300],
                detail={
                    "subject": identity.subject,
                    "reason": "a local account linked by email before issuers were recorded: link it again explicitly",
                },
            )
            identity.delete()
        else:
            identity.issuer = issuer
            identity.save(update_fields=["issuer"])


class Migration(migrations.Migration):

    dependencies = [
        ("accounts", "0003_oidc_identity"),
    ]

    operations = [
        migrations.AddField(
            model_name="oidcidentity",
            name="issuer",
            field=models.CharField(default="", help_text="The provider's `iss` (PASSBAND_OIDC_ISSUER).", max_length=500),
            preserve_default=False,
        ),
        migrations.AlterField(
            model_name="oidcidentity",
            name="subject",
            field=models.CharField(help_text="The provider's `sub` claim.", max_length=255),
        ),
        migrations.RunPython(issuer_or_unlink, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="oidcidentity",
            constraint=models.UniqueConstraint(fields=("issuer", "subject"), name="oidc_identity_issuer_subject"),
        ),
    ]
