"""A tool-environment plug-in as its declaration helper read it: stand-ins the host validates and keeps, with no
code of the plug-in's in them.

The helper (engine/declaration_worker.py) imports the plug-in's package, locked down, and answers what its module
(or stateful class) declares as tagged data: the values of TOOL_SCHEMAS, TABLES, ENVIRONMENT, DEPENDENCIES,
REQUIREMENTS, MEMORY_MB and RESET_SECONDS, and which of its attributes are functions (reset, snapshot, dump, load,
the tools, the STATE_CHECKS, a stateful class's methods). `module_from` and `class_from` rebuild these as objects
with the same attributes, every function a stand-in that refuses to run (a plug-in's functions run in its
sandbox: engine/episodes/world.py), so that engine/episodes/plugins.py validates them with the same checks and
messages as a loaded module, and the worker or web process never imports the package.
"""

from __future__ import annotations

from typing import Any


class DeclarationMalformed(ValueError):
    """The helper's answer is not a declaration this module can read."""


class Opaque:
    """A declared value that is neither plain data nor a function (its type's name kept for messages)."""

    def __init__(self, type_name: str) -> None:
        self.type_name = type_name

    def __repr__(self) -> str:
        return f"<{self.type_name}>"


class StandIn:
    """A plug-in's function, declared: callable as far as validation goes, refused if anything calls it here."""

    def __init__(self, name: str) -> None:
        self.__qualname__ = self.__name__ = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"{self.__name__} is a plug-in's code: it runs in the plug-in's sandbox, not here")

    def __repr__(self) -> str:
        return f"<plug-in function {self.__name__}>"


def decoded(data: Any) -> Any:
    """The value tagged ``data`` stands for (engine/declaration_worker.py ``encoded``); raises DeclarationMalformed."""
    if not (isinstance(data, list) and len(data) == 2 and isinstance(data[0], str)):
        raise DeclarationMalformed(f"a declared value must be [tag, data], not {str(data)[:80]}")
    tag, value = data
    if tag == "value" and (value is None or isinstance(value, (bool, int, float, str))):
        return value
    if tag in ("list", "tuple") and isinstance(value, list):
        items = [decoded(item) for item in value]
        return items if tag == "list" else tuple(items)
    if tag == "dict" and isinstance(value, list):
        try:
            return {decoded(pair[0]): decoded(pair[1]) for pair in value}
        except (TypeError, IndexError, KeyError):
            raise DeclarationMalformed("a declared dict must be a list of [key, value] pairs") from None
    if tag == "callable" and isinstance(value, str):
        return StandIn(value)
    if tag == "other" and isinstance(value, str):
        return Opaque(value)
    raise DeclarationMalformed(f"a declared value has an unknown tag {tag!r}")


class Declared:
    """A module or class as declared: ``__name__`` (or ``__module__`` and ``__qualname__``), ``__file__`` and
    ``__path__`` where the source lives, and the contract's attributes it has."""

    def __init__(self, **attributes: Any) -> None:
        for name, value in attributes.items():
            setattr(self, name, value)

    def __repr__(self) -> str:
        return f"<declared {getattr(self, '__name__', getattr(self, '__qualname__', 'plug-in'))}>"


def _fields(data: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    if not isinstance(data, dict) or not isinstance(data.get("module"), str) or not data["module"]:
        raise DeclarationMalformed("a tool environment's declaration must name its module")
    attributes = data.get("attributes")
    if not isinstance(attributes, dict) or not all(isinstance(name, str) for name in attributes):
        raise DeclarationMalformed("a tool environment's declaration must list its attributes")
    return data, {name: decoded(value) for name, value in attributes.items() if not name.startswith("__")}


def source_of(data: Any) -> Declared:
    """The module whose source runs in the sandbox: its name, file and (for a package) ``__path__``."""
    data, _ = _fields(data)
    file = data.get("file")
    source = Declared(__name__=data["module"], __file__=file if isinstance(file, str) else None)
    if data.get("package") is True and isinstance(file, str):
        setattr(source, "__path__", [file.rpartition("/")[0]])  # noqa: B010 - a package's, read by hasattr
    return source


def module_from(data: Any) -> Declared:
    """A plug-in module as declared: its source's names with the contract's attributes it has."""
    _, attributes = _fields(data)
    module = source_of(data)
    for name, value in attributes.items():
        setattr(module, name, value)
    return module


def class_from(data: Any) -> Declared:
    """A stateful class as declared: ``__module__``, ``__qualname__`` and the attributes and methods it has."""
    data, attributes = _fields(data)
    qualname = data.get("qualname")
    if not isinstance(qualname, str) or not qualname:
        raise DeclarationMalformed("a stateful class's declaration must name the class")
    return Declared(__module__=data["module"], __qualname__=qualname, __name__=qualname, **attributes)
