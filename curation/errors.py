from accounts.errors import ServiceError


class CurationError(ServiceError):
    """A request the curation services refuse; the message says what to do instead."""
