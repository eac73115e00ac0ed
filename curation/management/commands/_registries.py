"""What `manage.py environments` reports of the registries besides plug-ins: every verifier kind, world provider
and export format, built-in or installed (with the package and version it came from), and the installed ones
each registry refused, with why."""

from __future__ import annotations

from typing import Any

from engine.formats import registry as formats
from engine.registry import BUILTIN, Refused
from engine.verifiers import registry as verifiers
from engine.worlds import registry as worlds

REGISTRIES = (
    ("verifier kinds", verifiers.GROUP),
    ("world providers", worlds.GROUP),
    ("export formats", formats.GROUP),
)


def origin(distribution: str, version: str) -> str:
    """``built-in`` for Passband's own, else ``installed: <package> <version>``."""
    if distribution == BUILTIN:
        return "built-in"
    return f"installed: {distribution} {version}".strip()


def _entries() -> dict[str, list[Any]]:
    return {
        "verifier kinds": list(verifiers.kind_registry().entries()),
        "world providers": list(worlds.provider_registry().entries()),
        "export formats": list(formats.format_registry().entries()),
    }


def _refused() -> dict[str, tuple[Refused, ...]]:
    return {
        "verifier kinds": verifiers.errors(),
        "world providers": worlds.errors(),
        "export formats": formats.errors(),
    }


def _described(registered: Any) -> dict[str, Any]:
    item = getattr(registered, "kind", None) or registered.item
    return {
        "name": item.name,
        "origin": origin(registered.distribution, registered.version),
        "source": registered.source,
        "version": item.version,
        "description": getattr(item, "description", ""),
    }


def registries_report() -> dict[str, Any]:
    """{registry: {"group", "registered": [{name, origin, source, version, description}], "refused": [...]}}."""
    entries, refused = _entries(), _refused()
    return {
        name: {
            "group": group,
            "registered": [_described(registered) for registered in entries[name]],
            "refused": [
                {
                    "name": item.name,
                    "entry_point": item.value,
                    "origin": origin(item.distribution, item.version),
                    "error": item.error,
                }
                for item in refused[name]
            ],
        }
        for name, group in REGISTRIES
    }


def registries_lines(report: dict[str, Any]) -> list[str]:
    """The report as the command prints it: a heading per registry, one line per implementation."""
    lines = []
    for name, registry in report.items():
        lines.append(f"{name[0].upper()}{name[1:]} (entry point group {registry['group']}):")
        for entry in registry["registered"]:
            lines.append(f"  {entry['name']}  ({entry['origin']}, {entry['source']})")
        for item in registry["refused"]:
            lines.append(f"  REFUSED {item['name']}  ({item['origin']}, entry point {item['entry_point']})")
            lines.append(f"    {item['error']}")
    return lines
