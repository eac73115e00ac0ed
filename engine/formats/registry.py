"""The export-format registry: which formats exist, built-in or installed.

Built-in formats are registered by name (``BUILTIN_FORMATS``: a module of engine/formats and its ``FORMAT``);
installed packages declare theirs under the entry point group ``passband.formats`` (the entry point's name
is the format's name, its value names an ``ExportFormat`` object). A package that cannot be imported,
declares a malformed format or reuses a taken name is refused and listed in ``errors()``, never fatal, and
never loses a built-in. Every registered format is written by release builds and the Hub folder.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Iterable
from importlib import metadata

from engine.formats.format import ExportFormat, format_problems
from engine.registry import Refused, Registry, installed_entry_points

GROUP = "passband.formats"
BUILTIN_FORMATS = ("native", "trl", "verifiers", "nemo_gym")


class ExportFormatError(ValueError):
    """An unknown format or file type was asked for; the message lists the known ones."""


def build(entry_points: Iterable[metadata.EntryPoint] | None = None) -> Registry[ExportFormat]:
    """A registry with every built-in format, then the installed ones (``entry_points``, default: those of
    the ``passband.formats`` group)."""
    built: Registry[ExportFormat] = Registry(what="export format", problems=format_problems)
    for name in BUILTIN_FORMATS:
        module = importlib.import_module(f"engine.formats.{name}")
        built.register(module.FORMAT, source=module.__name__)
    built.load_entry_points(installed_entry_points(GROUP) if entry_points is None else entry_points)
    return built


@functools.lru_cache(maxsize=1)
def format_registry() -> Registry[ExportFormat]:
    """The process's registry, built on first use."""
    return build()


def refresh() -> None:
    """Forget the registry: the next use discovers the installed formats again."""
    format_registry.cache_clear()


def errors() -> tuple[Refused, ...]:
    """The installed formats that were refused, with why."""
    return format_registry().refused()


def names() -> tuple[str, ...]:
    """Every registered format's name, built-ins first."""
    return format_registry().names()


def all_formats() -> tuple[ExportFormat, ...]:
    """Every registered format, built-ins first."""
    return format_registry().items()


def format_named(name: str) -> ExportFormat:
    """The registered format called ``name``; ExportFormatError listing the known ones when there is none."""
    found = format_registry().get(name) if isinstance(name, str) else None
    if found is None:
        raise ExportFormatError(f"Unknown format {name!r}; use one of {', '.join(names())}.")
    return found
