"""Template filters for showing stored values to people."""

import json

from django import template

register = template.Library()


@register.filter
def as_json(value, indent: int | None = None) -> str:
    """A JSON value (a verifier config, metadata) as JSON text, not Python's repr of a dict."""
    return json.dumps(value, ensure_ascii=False, indent=indent, sort_keys=False)


@register.filter
def percent(value) -> str:
    """A share (0-1) as a whole percentage; a dash for none."""
    return "—" if value is None else f"{100 * float(value):.0f}%"


@register.filter
def band_label(value) -> str:
    """A band as people read it, the one spelling every page uses: "too hard", "in band", "retire"."""
    return str(value or "").replace("_", " ")


@register.filter
def get_item(mapping, key):
    """`mapping[key]`, or None: for keys a template cannot spell, like "trl.jsonl"."""
    return mapping.get(key) if hasattr(mapping, "get") else None


@register.filter
def duration(seconds) -> str:
    """A rough, readable duration: "40 s", "12 min", "3.5 h"; empty for None."""
    if seconds is None:
        return ""
    seconds = float(seconds)
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
