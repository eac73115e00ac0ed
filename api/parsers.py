"""The API's JSON parser: bounded in size and nesting, so no body can exhaust memory or the stack."""

import orjson
from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

# orjson refuses documents nested deeper than this (1024) with a decode error; the bodies Passband
# takes (tasks, feedback, verify requests) nest a handful of levels.
MAX_DEPTH = 1024


class BoundedJSONParser(JSONParser):
    """JSON bodies up to settings.PASSBAND_API_MAX_BODY_BYTES; deeper or larger ones are a 400."""

    def parse(self, stream, media_type=None, parser_context=None):
        limit = settings.PASSBAND_API_MAX_BODY_BYTES
        body = stream.read(limit + 1) if stream is not None else b""
        if len(body) > limit:
            raise ParseError(f"The body is over {limit:,} bytes; send fewer items per request.")
        if not body:
            raise ParseError("The body is empty; send a JSON document.")
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError as error:
            raise ParseError(f"The body is not valid JSON (or nests deeper than {MAX_DEPTH} levels): {error}") from None
