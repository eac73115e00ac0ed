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
