"""Start the provider: migrate its own database, make its people and Passband's client, then serve.

Environment: OIDC_PROVIDER_DB, OIDC_PROVIDER_KEY (PEM), OIDC_PROVIDER_PEOPLE (the claims file, whose
keys are the people; each signs in with password "pw-<name>"), OIDC_PROVIDER_CLIENT ("id:secret"),
OIDC_PROVIDER_REDIRECT (Passband's callback URL), OIDC_PROVIDER_PORT.
"""

import json
import os
import sys
from pathlib import Path
from wsgiref.simple_server import WSGIRequestHandler, make_server


class QuietHandler(WSGIRequestHandler):
    def log_message(self, format, *args):  # the test's output stays readable
        pass


def main() -> None:
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.support.oidc_provider.settings"
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.core.wsgi import get_wsgi_application
    from oauth2_provider.models import Application

    call_command("migrate", verbosity=0)
    for name, person in json.loads(Path(os.environ["OIDC_PROVIDER_PEOPLE"]).read_text()).items():
        get_user_model().objects.create_user(name, email=person["email"], password="pw-" + name)
    client_id, client_secret = os.environ["OIDC_PROVIDER_CLIENT"].split(":")
    Application.objects.create(
        name="passband",
        client_id=client_id,
        client_secret=client_secret,
        client_type=Application.CLIENT_CONFIDENTIAL,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris=os.environ["OIDC_PROVIDER_REDIRECT"],
        algorithm=Application.RS256_ALGORITHM,
        skip_authorization=True,
    )
    server = make_server(
        "127.0.0.1", int(os.environ["OIDC_PROVIDER_PORT"]), get_wsgi_application(), handler_class=QuietHandler
    )
    print("ready", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
