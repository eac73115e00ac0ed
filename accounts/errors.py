class ServiceError(Exception):
    """A problem the user caused and can fix; views and commands show its message.

    Every app's services raise a subclass of this one type (CurationError, CalibrationError,
    ReleaseError), so a view that calls services across apps catches one thing.
    """
