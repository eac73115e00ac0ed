"""The signed-in user's API tokens: list, create (the secret is shown once), revoke."""

from django.contrib import messages
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from accounts import services
from accounts.errors import ServiceError
from accounts.models import ApiToken, OidcIdentity
from accounts.oidc import LINK_SESSION_KEY
from accounts.permissions import scopes_allowed
from curation import policy

EXPIRY_CHOICES = (7, 30, 90, 365)


@policy.page("token_list")
def token_list(request):
    """GET: the user's tokens. POST: create one and show its secret on this response only."""
    secret = None
    if request.method == "POST":
        try:
            expires_in_days = int(request.POST.get("expires_in_days") or 90)
            if expires_in_days not in EXPIRY_CHOICES:
                raise ServiceError(f"Expiry: choose one of {', '.join(map(str, EXPIRY_CHOICES))} days.")
            name = request.POST.get("name", "").strip()
            if not name:
                raise ServiceError("Name: give the token a name, e.g. the trainer or machine that will use it.")
            token, secret = services.api_token_create(
                user=request.user,
                name=name[:100],
                scopes=request.POST.getlist("scopes"),
                expires_in_days=expires_in_days,
            )
            messages.success(request, f"Token {token.prefix}… created. Copy it now: it is not shown again.")
        except (ServiceError, ValueError) as error:
            messages.error(request, str(error))
    tokens = ApiToken.objects.filter(user=request.user)
    return render(
        request,
        "curation/tokens.html",
        {
            "tokens": tokens,
            "secret": secret,
            "scopes": scopes_allowed(request.user),
            "expiry_choices": EXPIRY_CHOICES,
            "identity": OidcIdentity.objects.filter(user=request.user).first(),
            "link_pending": LINK_SESSION_KEY in request.session,
        },
    )


@require_POST
@policy.page("token_revoke")
def token_revoke(request, token_id: int):
    token = policy.get_for(request.user, policy.CHANGE, ApiToken.objects.all(), pk=token_id)
    services.api_token_revoke(token=token)
    messages.success(request, f"Token {token.prefix}… ({token.name}) revoked.")
    return redirect("token_list")
