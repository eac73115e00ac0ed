class CurationError(Exception):
    """A request the curation services refuse; the message says what to do instead."""
