from accounts.errors import ServiceError


class CalibrationError(ServiceError):
    """A request the calibration services refuse; the message says what to do instead."""
