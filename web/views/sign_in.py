"""Sign-in with the organisation's provider: the callback that says why a sign-in failed, and the step by
which a signed-in person links their own account to their organisation identity (accounts.oidc)."""

from django.core.exceptions import SuspiciousOperation
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView

from accounts import oidc
from curation import policy

GENERIC_FAILURE = "The sign-in could not be completed (it was started in another browser, or already used)."


class OidcCallback(OIDCAuthenticationCallbackView):
    """mozilla-django-oidc's callback; every failure (a replayed or invalid code, a token from another
    issuer or for another audience, a provider that does not answer) is the sign-in error page, a 400
    saying why, never a 500 or a silent redirect. Public: the provider's answer is its credential."""

    policy_route = "oidc_authentication_callback"

    def get(self, request):
        try:
            return super().get(request)
        except oidc.SignInRefused as refusal:
            return sign_in_failed(request, str(refusal))
        except SuspiciousOperation as suspicious:
            return sign_in_failed(request, f"{GENERIC_FAILURE} ({suspicious})")

    def login_failure(self):
        return sign_in_failed(self.request, GENERIC_FAILURE)


def sign_in_failed(request, reason: str):
    return render(request, "registration/oidc_failed.html", {"reason": reason}, status=400)


@require_POST
@policy.page("oidc_link")
def oidc_link(request):
    """Start linking the signed-in account to the organisation identity the person signs in with next; the
    tokens page then offers the way to the provider (a link: the page's CSP lets forms post only here)."""
    oidc.link_start(request)
    return redirect(reverse("token_list"))


@policy.page("landing")
def landing(request):
    """Where signing in leads (LOGIN_REDIRECT_URL): the environments for people who curate in the browser, the
    releases for trainer-only accounts (the rest of the browser is not theirs: they would meet a 403)."""
    return redirect("environment_list" if policy.is_browser_user(request.user) else "release_list")
