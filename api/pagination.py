"""The API's cursor pagination: DRF's, with the cursor held to what Passband writes."""

from base64 import b64decode
from urllib import parse

from rest_framework.exceptions import ValidationError
from rest_framework.pagination import CursorPagination

from engine import input_rules

# A cursor Passband writes is base64 of at most "o=<offset>&r=1&p=<id>": well under 100 characters.
MAX_CURSOR = 200
KEYS = {"o", "r", "p"}


class StrictCursorPagination(CursorPagination):
    """Cursor pagination whose cursor must be one Passband could have written: at most MAX_CURSOR
    characters of base64, of the keys o (offset), r (reverse) and p (an id), each once, the id a whole
    number within 64 bits. Anything else is a 400 naming `cursor`, never a silent first page."""

    def decode_cursor(self, request):
        encoded = request.query_params.get(self.cursor_query_param)
        if encoded is not None:
            reason = cursor_problem(encoded)
            if reason is not None:
                raise ValidationError({self.cursor_query_param: [reason]})
        return super().decode_cursor(request)


def cursor_problem(encoded: str) -> str | None:
    """Why `encoded` is not a cursor Passband wrote, or None."""
    if len(encoded) > MAX_CURSOR:
        return f"is {len(encoded):,} characters long; a cursor is at most {MAX_CURSOR}: use the `next` link as given"
    try:
        tokens = parse.parse_qs(b64decode(encoded.encode("ascii"), validate=True).decode("ascii"), strict_parsing=True)
    except ValueError:
        return "is not a cursor this API wrote: use the `next` or `previous` link as given"
    if set(tokens) - KEYS or any(len(values) != 1 for values in tokens.values()):
        return "is not a cursor this API wrote: use the `next` or `previous` link as given"
    position = tokens.get("p", ["0"])[0]
    if not position.lstrip("-").isdigit() or input_rules.integer_problem(int(position)) is not None:
        return "names no position this API wrote: use the `next` or `previous` link as given"
    return None
