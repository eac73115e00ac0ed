"""Unified diffs: read a model's patch out of its answer, split it per file, drop what it may not touch.

Everything here is text processing in the calling process; the patch is applied in the sandbox
(``runner_program.py``). The rule of which paths a patch may not change lives here and only here:
test files, the pytest configuration, interpreter start-up hooks and packaging metadata.
"""

from __future__ import annotations

import difflib
import fnmatch
import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath

TEST_DIRECTORY_NAMES = frozenset({"tests", "test", "testing"})
TEST_FILE_PATTERNS = ("test_*.py", "*_test.py", "conftest.py")
# The files pytest reads its configuration from, in the order it looks for them (the one list: the
# runner, the clean-up and the filter read it; tests/engine/repo_tasks/test_patches.py holds it to
# the installed pytest's own list).
PYTEST_CONFIG_FILES = (
    "pytest.toml",
    ".pytest.toml",
    "pytest.ini",
    ".pytest.ini",
    "pyproject.toml",
    "tox.ini",
    "setup.cfg",
)
# The pytest configuration (any of these can carry addopts, plugins, a different rootdir) and
# files the interpreter runs on its own at start-up.
PROTECTED_FILE_NAMES = frozenset(
    {
        *PYTEST_CONFIG_FILES,
        "conftest.py",
        "sitecustomize.py",
        "usercustomize.py",
        "pytest.py",
    }
)
PROTECTED_SUFFIXES = (".pth", ".pyc", ".dist-info", ".egg-info")
PROTECTED_COMPONENTS = frozenset({".git", "__pycache__", "pytest", "_pytest", "pluggy"})
SYMLINK_MODE = "120000"

_HUNK_HEADER = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")
_FENCE = re.compile(r"```(?:diff|patch|udiff)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)


@dataclass
class FilePatch:
    """The lines of a patch that concern one file, and every path they name."""

    lines: list[str] = field(default_factory=list)
    paths: set[str] = field(default_factory=set)
    modes: set[str] = field(default_factory=set)
    has_new_header: bool = False

    @property
    def text(self) -> str:
        return "".join(self.lines)


@dataclass(frozen=True)
class FilteredPatch:
    """A patch with its forbidden file sections removed: ``text`` is what gets applied."""

    text: str
    kept: tuple[str, ...]
    dropped: tuple[str, ...]


def extract_patch(completion_text: str) -> str:
    """The unified diff in a model's answer: the ```diff fences if there are any, else the
    answer from its first diff header on. Empty when there is none."""
    fenced = [block for block in _FENCE.findall(completion_text) if _looks_like_diff(block)]
    if fenced:
        text = "\n".join(block.rstrip("\n") for block in fenced)
    else:
        match = re.search(r"^(diff --git |--- )", completion_text, re.MULTILINE)
        text = completion_text[match.start() :] if match else ""
    if text and not text.endswith("\n"):
        text += "\n"
    return text


def _looks_like_diff(block: str) -> bool:
    return bool(re.search(r"^(diff --git |--- |@@ )", block, re.MULTILINE))


_C_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


def unquote_git_path(path: str) -> str:
    """A path as git writes it in a patch header: C-quoted (``"a/conf\\164est.py"``, octal bytes of
    UTF-8) when it holds unusual characters, else as is. Out: the path git means."""
    if not (len(path) >= 2 and path.startswith('"') and path.endswith('"')):
        return path
    body = path[1:-1]
    data = bytearray()
    index = 0
    while index < len(body):
        char = body[index]
        if char != "\\" or index + 1 == len(body):
            data += char.encode("utf-8")
            index += 1
            continue
        following = body[index + 1]
        if following in "01234567":
            digits = body[index + 1 : index + 4]
            data.append(int(digits, 8) & 0xFF)
            index += 1 + len(digits)
        else:
            data.append(_C_ESCAPES.get(following, ord(following) if following.isascii() else 63))
            index += 2
    return data.decode("utf-8", "replace")


def _header_paths(rest: str) -> list[str]:
    """The two paths of a ``diff --git`` header, either of them quoted."""
    rest = rest.strip()
    if rest.startswith('"'):
        end = rest.find('" ', 1)
        while end != -1 and rest[end - 1] == "\\":
            end = rest.find('" ', end + 1)
        if end != -1:
            return [rest[: end + 1], rest[end + 2 :]]
    if rest.endswith('"') and ' "' in rest:
        split = rest.rindex(' "')
        return [rest[:split], rest[split + 1 :]]
    parts = rest.split(" b/", 1)
    return [parts[0], "b/" + parts[1]] if len(parts) == 2 else parts


def _strip_prefix(path: str) -> str:
    path = path.strip()
    if not path.startswith('"'):
        path = path.split("\t", 1)[0]
    elif '"\t' in path:
        path = path[: path.rindex('"\t') + 1]
    path = unquote_git_path(path.strip())
    if path == "/dev/null":
        return ""
    if path.startswith(("a/", "b/")):
        path = path[2:]
    return path


def split_patch(text: str) -> list[FilePatch]:
    """The file sections of a unified diff (git's extended headers and plain ``---``/``+++`` ones).

    Hunks are read by their line counts, so a removed line that starts with ``--`` is never
    taken for a new file header. Text before the first section is dropped.
    """
    lines = text.splitlines(keepends=True)
    files: list[FilePatch] = []
    current: FilePatch | None = None
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.startswith("diff --git "):
            current = FilePatch()
            files.append(current)
            current.lines.append(line)
            current.paths.update(_strip_prefix(part) for part in _header_paths(line[len("diff --git ") :]))
            index += 1
            continue
        if line.startswith("--- ") and index + 1 < len(lines) and lines[index + 1].startswith("+++ "):
            if current is None or current.has_new_header:
                current = FilePatch()
                files.append(current)
            current.lines += [line, lines[index + 1]]
            current.paths.update({_strip_prefix(line[4:]), _strip_prefix(lines[index + 1][4:])})
            current.has_new_header = True
            index += 2
            continue
        header = _HUNK_HEADER.match(line)
        if header and current is not None:
            old_left = int(header.group(1)) if header.group(1) is not None else 1
            new_left = int(header.group(2)) if header.group(2) is not None else 1
            current.lines.append(line)
            index += 1
            while index < len(lines) and (old_left > 0 or new_left > 0 or lines[index].startswith("\\")):
                body = lines[index]
                if body.startswith("\\"):
                    pass
                elif body.startswith("-"):
                    old_left -= 1
                elif body.startswith("+"):
                    new_left -= 1
                else:  # context (a blank line is context whose leading space was eaten)
                    old_left -= 1
                    new_left -= 1
                current.lines.append(body if body.strip("\r\n") or body.startswith(" ") else " " + body)
                index += 1
            continue
        if current is not None:
            for keyword in ("rename from ", "rename to ", "copy from ", "copy to "):
                if line.startswith(keyword):
                    current.paths.add(unquote_git_path(line[len(keyword) :].strip()))
            for keyword in ("new file mode ", "old mode ", "new mode ", "deleted file mode "):
                if line.startswith(keyword):
                    current.modes.add(line[len(keyword) :].strip())
            current.lines.append(line)
        index += 1
    for file_patch in files:
        file_patch.paths.discard("")
    return files


def is_test_path(path: str) -> bool:
    """A test file or a file in a test directory (the grader brings its own)."""
    parts = PurePosixPath(path).parts
    if any(part in TEST_DIRECTORY_NAMES for part in parts[:-1]):
        return True
    return bool(parts) and any(fnmatch.fnmatch(parts[-1], pattern) for pattern in TEST_FILE_PATTERNS)


def forbidden_reason(path: str, *, hidden_tests: frozenset[str] = frozenset()) -> str:
    """Why a patch may not touch ``path`` ("" when it may)."""
    pure = PurePosixPath(path)
    if pure.is_absolute() or ".." in pure.parts:
        return "outside the repository"
    if path in hidden_tests:
        return "a hidden test file"
    if is_test_path(path):
        return "a test file"
    name = pure.name
    if name in PROTECTED_FILE_NAMES:
        return "test configuration or an interpreter start-up file"
    if any(part.endswith(PROTECTED_SUFFIXES) or part in PROTECTED_COMPONENTS for part in pure.parts):
        return "interpreter or packaging metadata"
    return ""


def filter_patch(text: str, *, hidden_tests: frozenset[str] = frozenset()) -> FilteredPatch:
    """``text`` without the file sections a model may not change (see ``forbidden_reason``) and
    without symbolic links. Out: the patch to apply, the paths kept, and ``path (why)`` for each
    section dropped."""
    kept: list[FilePatch] = []
    kept_paths: list[str] = []
    dropped: list[str] = []
    for file_patch in split_patch(text):
        reasons = [
            f"{path} ({reason})"
            for path in sorted(file_patch.paths)
            if (reason := forbidden_reason(path, hidden_tests=hidden_tests))
        ]
        if SYMLINK_MODE in file_patch.modes:
            reasons.append(f"{', '.join(sorted(file_patch.paths))} (a symbolic link)")
        if reasons:
            dropped += reasons
        else:
            kept.append(file_patch)
            kept_paths += sorted(file_patch.paths)
    return FilteredPatch(
        text="".join(file_patch.text for file_patch in kept),
        kept=tuple(dict.fromkeys(kept_paths)),
        dropped=tuple(dict.fromkeys(dropped)),
    )


def diff_files(before: dict[str, str], after: dict[str, str]) -> str:
    """A git-style unified diff turning the files ``before`` into ``after`` ({path: text})."""

    sections = []
    for path in sorted(set(before) | set(after)):
        old, new = before.get(path), after.get(path)
        if old == new:
            continue
        header = f"diff --git a/{path} b/{path}\n"
        if old is None:
            header += "new file mode 100644\n"
        elif new is None:
            header += "deleted file mode 100644\n"
        body = "".join(
            _terminated(line)
            for line in difflib.unified_diff(
                (old or "").splitlines(keepends=True),
                (new or "").splitlines(keepends=True),
                "/dev/null" if old is None else f"a/{path}",
                "/dev/null" if new is None else f"b/{path}",
            )
        )
        sections.append(header + body)
    return "".join(sections)


def _terminated(line: str) -> str:
    return line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
