"""A plug-in whose tools try to leave their sandbox; its source passes discovery's import check (the
import names are built at run time), so only the sandbox's view stands in the way. Each tool reports what
it reached: Passband's packages by an import spelled to dodge the check, by a path added to sys.path,
and a nested user namespace. `own_dependency` imports what DEPENDENCIES declares."""

import builtins
import ctypes
import json
import os
import sys

TABLES = ("attempts",)
DEPENDENCIES = ("iniconfig",)
_NO_ARGUMENTS = {"type": "object", "properties": {}}
TOOL_SCHEMAS = [
    {"type": "function", "function": {"name": "import_django", "parameters": _NO_ARGUMENTS}},
    {
        "type": "function",
        "function": {
            "name": "import_from_path",
            "parameters": {"type": "object", "properties": {"folders": {"type": "array", "items": {"type": "string"}}}},
        },
    },
    {"type": "function", "function": {"name": "new_user_namespace", "parameters": _NO_ARGUMENTS}},
    {"type": "function", "function": {"name": "own_dependency", "parameters": _NO_ARGUMENTS}},
]
CLONE_NEWUSER = 0x10000000


def _imported(name):
    load = getattr(builtins, "__imp" + "ort__")
    try:
        return load(name).__name__
    except ImportError as error:
        return f"ImportError: {error}"


def import_django(world):
    return {"django": _imported("dj" + "ango"), "celery": _imported("cel" + "ery")}


def import_from_path(world, *, folders):
    sys.path.extend(folders)
    return {"django": _imported("dj" + "ango"), "seen": [folder for folder in folders if os.path.exists(folder)]}


def new_user_namespace(world):
    libc = ctypes.CDLL(None, use_errno=True)
    pid = os.fork()
    if pid == 0:  # unshare in a child, so the tool's own process stays as it was
        os._exit(0 if libc.unshare(CLONE_NEWUSER) == 0 else 1)
    _, status = os.waitpid(pid, 0)
    return {"unshared": os.waitstatus_to_exitcode(status) == 0}


def own_dependency(world):
    import iniconfig  # declared in DEPENDENCIES: discovery accepts it, the sandbox mounts it

    return {"iniconfig": iniconfig.__name__}


TOOLS = {
    "import_django": import_django,
    "import_from_path": import_from_path,
    "new_user_namespace": new_user_namespace,
    "own_dependency": own_dependency,
}


def reset(seed):
    return {}


def snapshot(world):
    return {"attempts": []}


def dump(world):
    return json.dumps(world).encode()


def load(data):
    return json.loads(data)
