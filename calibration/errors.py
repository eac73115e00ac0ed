from accounts.errors import ServiceError


class CalibrationError(ServiceError):
    """A request the calibration services refuse; the message says what to do instead."""


class ServerUnavailable(Exception):
    """Some samples of a round failed for infrastructure reasons (the model server is down, refuses or
    times out) and were not stored: the round is asked for again later. `stored` samples were kept."""

    def __init__(self, message: str, *, stored: int, withheld: int) -> None:
        super().__init__(message)
        self.stored = stored
        self.withheld = withheld
