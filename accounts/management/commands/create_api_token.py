from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from accounts import services
from accounts.errors import ServiceError


class Command(BaseCommand):
    help = "Create an API token for a user and print it once."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", default="cli")
        parser.add_argument("--scopes", default="read", help="Comma-separated: read,export,feedback,verify")
        parser.add_argument("--expires-in-days", type=int, default=90, help="0 for no expiry.")
        parser.add_argument("--revoke", metavar="PREFIX", help="Revoke the user's token with this prefix instead.")

    def handle(self, *args, username: str, name: str, scopes: str, expires_in_days: int, revoke: str | None, **options):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No user {username!r}.")
        if revoke:
            token = user.api_tokens.filter(prefix=revoke.rstrip("…")).first()
            if token is None:
                raise CommandError(f"--revoke: {username} has no token with prefix {revoke!r}.")
            services.api_token_revoke(token=token)
            self.stderr.write(f"Revoked token {token.prefix}… ({token.name}) of {username}.")
            return
        try:
            token, secret = services.api_token_create(
                user=user,
                name=name,
                scopes=[s.strip() for s in scopes.split(",") if s.strip()],
                expires_in_days=expires_in_days or None,
            )
        except ServiceError as error:
            raise CommandError(str(error)) from None
        self.stderr.write(f"Token {token.prefix}… for {username}, scopes {', '.join(token.scopes)}. Shown once:")
        self.stdout.write(secret)
