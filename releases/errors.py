from accounts.errors import ServiceError


class ReleaseError(ServiceError):
    """A release request the services refuse; the message says what to do instead."""
