from accounts.errors import ServiceError


class SimilarityError(ServiceError):
    """A near-duplicate or contamination action that cannot be done, with a message for the user."""
