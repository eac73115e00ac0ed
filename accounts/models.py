"""Who may call the API: per-user tokens with scopes. Roles are Django groups (see permissions)."""

from django.conf import settings
from django.db import models


class ApiToken(models.Model):
    """A per-user API token. Only its sha256 is stored; the secret is shown once."""

    SCOPES = ("read", "export", "feedback", "verify", "curate")

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=12, help_text="The first characters, to recognise a token.")
    token_hash = models.CharField(max_length=64, unique=True)
    scopes = models.JSONField(default=list)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        db_table = "curation_apitoken"  # created by curation before tokens had their own app

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.name})"


class AuditEvent(models.Model):
    """One thing someone did, for the audit log (accounts.audit): who, what, to which object, when.

    The object is named by its model (`object_kind`, e.g. "task"), id and a label copied when the
    event happened, so an event outlives its object and every app can record one without a foreign key."""

    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    action = models.CharField(max_length=40)
    object_kind = models.CharField(max_length=40)
    object_id = models.PositiveBigIntegerField(null=True, blank=True)
    object_label = models.CharField(max_length=300, blank=True)
    detail = models.JSONField(default=dict, blank=True)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [
            models.Index(fields=["object_kind", "object_id"], name="audit_event_object"),
            models.Index(fields=["action", "at"], name="audit_event_action"),
            models.Index(fields=["actor", "at"], name="audit_event_actor"),
        ]

    def __str__(self) -> str:
        return f"{self.actor} {self.action} {self.object_kind} {self.object_label}"


class OidcIdentity(models.Model):
    """The organisation's identity a Passband user signs in with (accounts.oidc): the provider (`issuer`,
    the ID token's `iss`) and its `subject` (`sub`), unique together. Nothing else links an identity to
    an account: never the email, which the provider's users may set."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="oidc_identity")
    issuer = models.CharField(max_length=500, help_text="The provider's `iss` (PASSBAND_OIDC_ISSUER).")
    subject = models.CharField(max_length=255, help_text="The provider's `sub` claim.")
    last_login_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["issuer", "subject"], name="oidc_identity_issuer_subject")]

    def __str__(self) -> str:
        return f"{self.user} as {self.subject} at {self.issuer}"
