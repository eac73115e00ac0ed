from curation.errors import CurationError


class ReviewError(CurationError):
    """A request the review services refuse; the message says what to do instead. A CurationError, so a
    caller that handles curation's refusals (a task transition inside a decision) handles these too."""
