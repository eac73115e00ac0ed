class CalibrationError(Exception):
    """A request the calibration services refuse; the message says what to do instead."""
