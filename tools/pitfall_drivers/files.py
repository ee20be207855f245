"""JSON files a user, a container or a cluster node wrote, read without trusting them; and
write_atomically, the one way the drivers, containers/cell_entry.py and ci/'s generators write
a file. Standard library only (it runs inside the matrix's images too)."""
from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path

from .cli import BadInput

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


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    return "a FIFO" if stat.S_ISFIFO(mode) else "not a regular file"


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
        raise BadInput(f"{path}: cannot read: {_kind(info.st_mode)}, not a file")
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
        return json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError as e:
        raise BadInput(f"{path}: not JSON: {e.msg} at line {e.lineno} column {e.colno}") from e
    except (ValueError, RecursionError) as e:
        raise BadInput(f"{path}: not JSON: {e}") from e


def write_atomically(path: Path | str, text: str, mode: int = 0o644) -> None:
    """`text` (UTF-8) into `path` whole or not at all: written to a temporary file in the same
    folder (a rename within one file system is atomic), flushed to disk, given `mode` (mkstemp's
    0600 would otherwise follow it into place, whatever the umask), then renamed over `path`. A
    reader sees the old file or the whole new one; on any failure the temporary file is removed
    and the error raised (OSError for a folder that is missing or not writable)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            os.fchmod(f.fileno(), mode)
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
