"""JSON files a user, a container or a cluster node wrote, read without trusting them, and files
written whole (a temporary file, then a rename). Shared by the matrix and fleet drivers
(ci/matrix.py, ci/fleet.py); standard library only, so it is installed beside the fleet driver."""
from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path


class BadInput(Exception):
    """A problem with the user's input: exit 2 with this message."""


# Files a user or a container writes are read through this: a FIFO, a directory, a symlink loop,
# a huge file, non-UTF-8 bytes, deep nesting or a number past a double's range become BadInput
# naming the file, never a hang or a traceback.
MAX_JSON_BYTES = 64 << 20
MAX_JSON_DEPTH = 128


def _json_depth(text: str) -> int:
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
            if deepest > MAX_JSON_DEPTH:
                break
        elif ch in "]}":
            depth -= 1
    return deepest


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def read_text(path: Path, max_bytes: int = MAX_JSON_BYTES) -> str:
    """The UTF-8 text of the regular file at `path`; BadInput naming the file for anything else
    (a FIFO or a directory, more than `max_bytes`, bytes that are not UTF-8), never a hang."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as e:
        raise BadInput(f"{path}: cannot read: {e.strerror}") from e
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        kind = "a directory" if stat.S_ISDIR(info.st_mode) else "a FIFO" if stat.S_ISFIFO(info.st_mode) else "not a regular file"
        raise BadInput(f"{path}: cannot read: {kind}, not a file")
    with os.fdopen(fd, "rb") as f:
        if info.st_size > max_bytes:
            raise BadInput(f"{path}: {info.st_size} bytes, more than the {max_bytes} a file here may have")
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise BadInput(f"{path}: more than the {max_bytes} bytes a file here may have")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadInput(f"{path}: not UTF-8 (byte {e.start})") from e


def read_json(path: Path):
    """The JSON document at `path`; BadInput naming the file for anything else."""
    text = read_text(path)
    if _json_depth(text) > MAX_JSON_DEPTH:
        raise BadInput(f"{path}: nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        doc = json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError as e:
        raise BadInput(f"{path}: not JSON: {e.msg} at line {e.lineno} column {e.colno}") from e
    except (ValueError, RecursionError) as e:
        raise BadInput(f"{path}: not JSON: {e}") from e
    return doc


def write_atomically(path: Path, text: str) -> None:
    """`text` into `path` whole or not at all: a reader never sees half a file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would follow the file into place
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
