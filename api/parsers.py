"""The API's JSON parser: bounded in size and nesting, and held to the input rule (engine.input_rules),
so no body can exhaust memory or the stack or carry text the database cannot store."""

import orjson
from django.conf import settings
from rest_framework.exceptions import ParseError, ValidationError
from rest_framework.parsers import BaseParser

from engine import input_rules


class BoundedJSONParser(BaseParser):
    """JSON bodies up to settings.PASSBAND_API_MAX_BODY_BYTES, nested at most
    input_rules.MAX_JSON_DEPTH levels, without NUL, lone surrogates or whole numbers beyond 64 bits;
    anything else is a 400 that names the field.

    Not a subclass of DRF's JSONParser: DRF hands that one `request.body`, which Django refuses
    over DATA_UPLOAD_MAX_MEMORY_SIZE (4 MB) with its own HTML page; this one reads the stream itself
    up to its own limit."""

    media_type = "application/json"

    def parse(self, stream, media_type=None, parser_context=None):
        limit = settings.PASSBAND_API_MAX_BODY_BYTES
        body = stream.read(limit + 1) if stream is not None else b""
        if len(body) > limit:
            raise ParseError(f"The body is over {limit:,} bytes; send fewer items per request.", code="too_large")
        if not body:
            raise ParseError("The body is empty; send a JSON document.")
        try:
            data = orjson.loads(body)  # refuses nesting deeper than 1,024 levels
        except orjson.JSONDecodeError as error:
            raise ParseError(
                f"The body is not valid JSON (or nests deeper than {input_rules.MAX_JSON_DEPTH} levels): {error}"
            ) from None
        problem = input_rules.value_problem(data, bounded_integers=True)
        if problem is not None:
            raise ValidationError({problem.field or "body": [problem.reason]})
        return data
