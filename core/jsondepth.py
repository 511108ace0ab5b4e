"""How deep a JSON text nests, measured without parsing it (so without recursion). Pure."""

from __future__ import annotations


def json_depth(text: str) -> int:
    """The deepest nesting of [ and { in a JSON text, outside strings."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest
