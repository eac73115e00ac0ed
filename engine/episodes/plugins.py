"""Environment plug-ins: Python packages that declare tool environments under an entry point.

A distribution declares one entry point per environment in the group `passband.environments`; its
name is the environment's name and its value a module (the tool package) that follows the contract
of docs/environments.md: `TOOL_SCHEMAS`, `TABLES`, `reset(seed)`, `snapshot(world)`, `dump(world)`,
`load(data)`, and `TOOLS` (or its own `call_tool`), optionally `STATE_CHECKS` and `replay`. Passband's
own `backoffice` is declared the same way, in its pyproject.toml.

Discovery (`discover()`, cached; `refresh()` forgets it) reads what each entry point names in a locked-down
helper process (engine/declarations.py): a plug-in's package, world provider or tool environment, is never
imported here. A tool environment's declaration comes back as data (engine/episodes/declared.py: its values,
and which functions it has, as stand-ins that never run here) and is validated here: the attributes exist,
the tool schemas are OpenAI function schemas with unique names and an implementation each, and the package
is self-contained (its modules import only the standard library and each other), because its source is what
runs inside the sandbox. A plug-in that fails is refused, not
registered, and its error says what to fix; `errors()` lists them.
"""

from __future__ import annotations

import ast
import functools
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any

from engine import declarations
from engine.episodes import declared, plugin_packages
from engine.episodes.tool_schemas import tool_schema_problems
from engine.registry import Refused, distribution_of
from engine.sandbox.package_environments import Lock
from engine.sandbox.view import top_level_modules

GROUP = "passband.environments"
NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_-]{0,79}$")
REQUIRED = ("TOOL_SCHEMAS", "TABLES", "reset", "snapshot", "dump", "load")
LOCKED_IMPORT_HINT = (
    " (a package of the plug-in's REQUIREMENTS lock exists only in its sandbox: import it inside the tools that use it)"
)


class PluginError(Exception):
    """A plug-in refused at discovery; the message says what is wrong and what to fix."""


class UnknownEnvironment(KeyError):
    """No installed plug-in declares this environment."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown tool environment"


@dataclass(frozen=True)
class Plugin:
    """One discovered environment: where it comes from and what it offers."""

    name: str
    module: Any  # its declaration (engine/episodes/declared.py): data and stand-ins, none of its code
    module_name: str
    distribution: str  # the installed package that declares it ("" when not known)
    version: str
    tool_schemas: tuple[dict[str, Any], ...]
    tables: tuple[str, ...]
    state_checks: tuple[str, ...] = ()
    source_files: tuple[Path, ...] = field(default=(), compare=False)
    # (dotted module name, file) of each module of its source: what its sandbox runs (engine/episodes/world.py)
    source_modules: tuple[tuple[str, Path], ...] = field(default=(), compare=False)
    dependencies: tuple[str, ...] = ()  # distributions its tool calls' sandbox mounts (DEPENDENCIES)
    lock: Lock | None = None  # its own package environment's lock (REQUIREMENTS), engine/episodes/plugin_packages.py
    # A stateful class (engine/episodes/stateful.py): `module` is its plugin_runtime.StatefulPlugin, `attribute`
    # the class's name in module `module_name`; its world lives in one sandbox session per episode.
    attribute: str = ""

    @property
    def stateful(self) -> bool:
        return bool(self.attribute)

    @property
    def tool_names(self) -> tuple[str, ...]:
        return tuple(schema["function"]["name"] for schema in self.tool_schemas)

    @property
    def tool_summaries(self) -> list[dict[str, Any]]:
        """Per tool: name, description and its arguments as [{"name", "type", "required"}], for pages and listings."""
        summaries = []
        for schema in self.tool_schemas:
            function = schema["function"]
            parameters = function.get("parameters") or {}
            required = set(parameters.get("required", []))
            arguments = [
                {
                    "name": name,
                    "type": (spec or {}).get("type", "") if isinstance(spec, dict) else "",
                    "required": name in required,
                }
                for name, spec in (parameters.get("properties") or {}).items()
            ]
            summaries.append(
                {"name": function["name"], "description": function.get("description", ""), "arguments": arguments}
            )
        return summaries

    @property
    def label(self) -> str:
        origin = f"{self.distribution} {self.version}".strip()
        return f"{self.name} ({origin}, module {self.module_name})" if origin else f"{self.name} ({self.module_name})"


@dataclass(frozen=True)
class Discovery:
    plugins: dict[str, Plugin]
    refused: tuple[Refused, ...]


# -- the package's source ----------------------------------------------------------------------------


def source_files(module: ModuleType) -> list[tuple[str, Path]]:
    """(dotted module name, file) of every module of the plug-in's package (or its single module)."""
    file = getattr(module, "__file__", None)
    if not file:
        raise PluginError(f"module {module.__name__} has no source file; a plug-in must be a Python package on disk")
    path = Path(file)
    if path.name != "__init__.py":
        return [(module.__name__, path)]
    files = []
    for found in sorted(path.parent.rglob("*.py")):
        relative = found.relative_to(path.parent).with_suffix("")
        parts = [part for part in relative.parts if part != "__init__"]
        if "__pycache__" in relative.parts:
            continue
        files.append((".".join([module.__name__, *parts]), found))
    return files


DYNAMIC_IMPORTS = frozenset({"__import__", "import_module"})


def _foreign_imports(
    name: str, path: Path, *, package: str, single: bool = False, provided: frozenset[str] | None = frozenset()
) -> list[str]:
    """Imports of anything but the standard library, the package itself and ``provided`` (the top-level
    modules of its declared dependencies; None: any), as "file:line imports x". A dynamic import (``__import__``,
    ``importlib.import_module``) counts by its literal argument and is refused without one. A help for
    authors, not the boundary: what the sandbox does not mount cannot be imported however it is named."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except SyntaxError as error:
        return [f"{path.name}:{error.lineno}: syntax error: {error.msg}"]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            targets = [node.module]
        elif isinstance(node, ast.ImportFrom) and node.level > 0 and single:
            found.append(f"{name} ({path.name}:{node.lineno}) imports relatively, but it is a module, not a package")
            continue
        elif isinstance(node, ast.Call) and _called_name(node.func) in DYNAMIC_IMPORTS:
            argument = node.args[0] if node.args else None
            if not (isinstance(argument, ast.Constant) and isinstance(argument.value, str)):
                found.append(
                    f"{name} ({path.name}:{node.lineno}) imports a module named at run time; import it by name"
                )
                continue
            targets = [argument.value]
        else:
            continue
        for target in targets:
            own = target == package or target.startswith(package + ".")
            top = target.split(".")[0]
            if not own and top not in sys.stdlib_module_names and provided is not None and top not in provided:
                found.append(f"{name} ({path.name}:{node.lineno}) imports {target}")
    return found


def _called_name(function: ast.expr) -> str:
    if isinstance(function, ast.Name):
        return function.id
    return function.attr if isinstance(function, ast.Attribute) else ""


# -- validation and discovery ------------------------------------------------------------------------


def plugin_from_module(
    module: ModuleType,
    *,
    name: str,
    distribution: str = "",
    version: str = "",
    check_imports: bool = True,
    contract: Any = None,
) -> Plugin:
    """Validate a loaded plug-in module against the contract; raises PluginError saying what to fix. With
    ``contract`` (a stateful class's plugin_runtime.StatefulPlugin), that is what is validated, and ``module``
    (where the class lives) only gives the source that runs in the sandbox."""
    source, module = module, module if contract is None else contract
    if not NAME_PATTERN.match(name):
        raise PluginError(f"the entry point name {name!r} must be a lowercase slug (letters, digits, '-', '_')")
    missing = [attribute for attribute in REQUIRED if not hasattr(module, attribute)]
    if not hasattr(module, "TOOLS") and not hasattr(module, "call_tool"):
        missing.append("TOOLS (or call_tool)")
    if missing:
        raise PluginError(f"module {module.__name__} lacks {', '.join(missing)} (see docs/environments.md)")
    for attribute in ("reset", "snapshot", "dump", "load"):
        if not callable(getattr(module, attribute)):
            raise PluginError(f"{module.__name__}.{attribute} must be a function")
    declared = getattr(module, "ENVIRONMENT", name)
    if declared != name:
        raise PluginError(f"{module.__name__}.ENVIRONMENT is {declared!r} but the entry point is named {name!r}")
    problems = tool_schema_problems(module.TOOL_SCHEMAS)
    if problems:
        raise PluginError("invalid tool schema: " + "; ".join(problems[:5]))
    schemas = tuple(module.TOOL_SCHEMAS)
    names = [schema["function"]["name"] for schema in schemas]
    _tools_check(module, names)
    tables = module.TABLES
    if (
        not isinstance(tables, (list, tuple))
        or not tables
        or not all(isinstance(table, str) and table for table in tables)
    ):
        raise PluginError(f"{module.__name__}.TABLES must be a non-empty tuple of the snapshot's table names")
    checks = getattr(module, "STATE_CHECKS", {})
    if not isinstance(checks, dict) or not all(
        isinstance(key, str) and callable(function) for key, function in checks.items()
    ):
        raise PluginError(
            f"{module.__name__}.STATE_CHECKS must be a dict of check name -> function(state, **arguments)"
        )
    files = source_files(source)
    single = not (hasattr(source, "__path__"))
    try:
        dependencies, lock = plugin_packages.declared(module, source=source)
    except plugin_packages.DeclarationError as error:
        raise PluginError(str(error)) from None
    if check_imports:
        _self_contained_check(source, files=files, dependencies=dependencies, single=single, locked=lock is not None)
    return Plugin(
        name=name,
        module=module,
        module_name=source.__name__,
        distribution=distribution,
        version=version,
        tool_schemas=schemas,
        tables=tuple(tables),
        state_checks=tuple(checks),
        source_files=tuple(path for _, path in files),
        source_modules=tuple(files),
        dependencies=dependencies,
        lock=lock,
    )


def _tools_check(module: ModuleType, names: list[str]) -> None:
    """PluginError unless the module's TOOLS, when it has them (rather than call_tool), are functions that
    implement exactly the tools `names` its TOOL_SCHEMAS declare."""
    tools = getattr(module, "TOOLS", None)
    if tools is None:
        return
    if not isinstance(tools, dict) or not all(callable(function) for function in tools.values()):
        raise PluginError(f"{module.__name__}.TOOLS must be a dict of tool name -> function")
    unimplemented = [tool for tool in names if tool not in tools]
    if unimplemented:
        raise PluginError(
            f"TOOL_SCHEMAS names {', '.join(unimplemented)}, which TOOLS does not implement "
            f"(TOOLS has {', '.join(tools) or 'nothing'}): add the function or remove the schema"
        )
    undeclared = [tool for tool in tools if tool not in names]
    if undeclared:
        raise PluginError(
            f"TOOLS implements {', '.join(undeclared)}, which TOOL_SCHEMAS does not declare: "
            "give each tool a schema, or the model can never call it"
        )


def _self_contained_check(
    module: ModuleType, *, files: list[tuple[str, Path]], dependencies: tuple[str, ...], single: bool, locked: bool
) -> None:
    """PluginError naming the first imports of the module's source `files` that its sandbox cannot satisfy
    (anything beyond the standard library, its own modules and its declared `dependencies`; with a lock, whose
    packages' module names are known only once installed, only dynamic and relative imports are checked)."""
    provided = None if locked else frozenset(top_level_modules(dependencies)) if dependencies else frozenset()
    foreign = [
        problem
        for module_name, path in files
        for problem in _foreign_imports(module_name, path, package=module.__name__, single=single, provided=provided)
    ]
    if foreign:
        raise PluginError(
            "the tool package must be self-contained (the standard library, its own modules and the "
            "distributions it names in DEPENDENCIES), because only these exist in its sandbox: "
            + "; ".join(foreign[:5])
        )


def discover_from(entry_points: Iterable[metadata.EntryPoint]) -> Discovery:
    """Load and validate these entry points (what `discover` does with the installed ones)."""
    plugins: dict[str, Plugin] = {}
    refused: list[Refused] = []
    for entry_point in sorted(entry_points, key=lambda point: (point.name, point.value)):
        distribution, version = distribution_of(entry_point)
        try:
            plugin = _load(entry_point, plugins, distribution=distribution, version=version)
        except PluginError as error:
            refused.append(Refused(entry_point.name, entry_point.value, distribution, version, str(error)))
            continue
        if plugin is not None:
            plugins[entry_point.name] = plugin
    return Discovery(plugins=plugins, refused=tuple(refused))


def _load(
    entry_point: metadata.EntryPoint, plugins: dict[str, Plugin], *, distribution: str, version: str
) -> Plugin | None:
    """The validated plug-in an entry point declares; None for a world provider declared in the same group
    (engine/worlds/registry.py takes those)."""
    if entry_point.name in plugins:
        other = plugins[entry_point.name]
        raise PluginError(
            f"environment {entry_point.name!r} is already declared by {other.distribution or other.module_name}"
        )
    try:  # read in a helper: the plug-in's package is never imported here
        if not declarations.names_tool_environment(GROUP, entry_point):
            return None
        answer = declarations.declared(GROUP, entry_point)
    except declarations.DeclarationRefused as refused:
        hint = LOCKED_IMPORT_HINT if refused.error == "ModuleNotFoundError" else ""
        raise PluginError(f"{refused}{hint}") from None
    try:
        if answer["environment"] == "class":
            from engine.episodes.stateful import plugin_from_class

            return plugin_from_class(
                declared.class_from(answer.get("declaration")),
                name=entry_point.name,
                distribution=distribution,
                version=version,
                source=declared.source_of(answer.get("declaration")),
            )
        module = declared.module_from(answer.get("declaration"))
    except declared.DeclarationMalformed as error:
        raise PluginError(f"its declaration could not be read: {error}") from None
    return plugin_from_module(module, name=entry_point.name, distribution=distribution, version=version)  # type: ignore[arg-type]


@functools.lru_cache(maxsize=1)
def discover() -> Discovery:
    """The installed plug-ins (entry point group `passband.environments`), loaded once per process."""
    return discover_from(metadata.entry_points(group=GROUP))


def refresh() -> None:
    """Forget the cached discovery (after installing a plug-in into a running process, and in tests)."""
    discover.cache_clear()


def installed() -> dict[str, Plugin]:
    return discover().plugins


def errors() -> tuple[Refused, ...]:
    return discover().refused


def get(name: str) -> Plugin:
    """The plug-in of environment `name`; raises UnknownEnvironment saying what is installed instead."""
    found = discover()
    if name in found.plugins:
        return found.plugins[name]
    raise UnknownEnvironment(unknown_message(name, found))


def unknown_message(name: str, found: Discovery | None = None) -> str:
    found = found or discover()
    refused = next((item for item in found.refused if item.name == name), None)
    if refused is not None:
        return (
            f"tool environment {name!r} ({refused.distribution or refused.value}) is installed but refused: "
            f"{refused.error}"
        )
    known = ", ".join(
        f"{plugin.name} ({plugin.distribution} {plugin.version})".replace(" ()", "")
        for plugin in found.plugins.values()
    )
    return (
        f"unknown tool environment {name!r}; installed plug-ins: {known or 'none'}. Install the package that "
        f"declares it under the entry point group {GROUP} (see docs/environments.md), or use one of these"
    )
