"""Natural order for task keys: `gsm8k/test/2` before `gsm8k/test/10`, as people count. No Django."""

import re

_DIGITS = re.compile(r"\d+")


def natural_sort_key(key: str) -> str:
    """A string whose plain (byte-wise) order is the natural order of `key`.

    Each run of digits becomes its length in three digits, then the number without leading zeros, so a
    shorter number sorts first and equal lengths compare digit by digit. Letters and punctuation stay.
    """

    def number(match: re.Match) -> str:
        digits = match.group().lstrip("0") or "0"
        return f"{len(digits):03d}{digits}"

    return _DIGITS.sub(number, key)
