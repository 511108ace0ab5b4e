"""A JSON parser for the API that refuses deeply nested bodies with a 400.

DRF's JSONParser hands the body to `json.load`, whose decoder recurses once per level: about a
thousand levels of `[` (two kilobytes) raise RecursionError, which surfaces as a 500. No request
Concord accepts nests more than a few levels, so anything deeper than MAX_DEPTH is refused before
it is parsed.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import IO, Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from core.jsondepth import json_depth

MAX_DEPTH = 32


class DepthLimitedJSONParser(JSONParser):
    """JSONParser that answers 400 to bodies nested deeper than MAX_DEPTH."""

    def parse(
        self,
        stream: IO[Any],
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        raw = stream.read()
        if json_depth(raw.decode("utf-8", errors="replace")) > MAX_DEPTH:
            raise ParseError(f"JSON parse error - nested deeper than {MAX_DEPTH} levels.")
        try:
            return super().parse(io.BytesIO(raw), media_type, parser_context)
        except RecursionError as exc:
            raise ParseError("JSON parse error - nested too deep.") from exc
