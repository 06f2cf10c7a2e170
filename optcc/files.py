"""Reading JSON input and writing output files safely: every failure is an OptccError.

read_text(path, field) / read_json(path, field): a regular file only (a directory, FIFO or
  device is refused rather than read or waited on), at most MAX_INPUT_BYTES, UTF-8; for
  read_json also valid JSON, integer literals of at
  most Python's 4300 digits, nested at most MAX_DEPTH deep (deeper input would overflow the
  stack of every later recursive step: hashing, printing).
check_writable(path, field): the refusals below, checked before the work that makes the text.
write_text_atomic(path, text, field): the text lands completely or not at all (temporary file
  in the same folder, then rename). The path must be new or an existing *regular* file: a
  symlink, directory, FIFO or device is refused, not replaced (renaming over /dev/null or a
  symlink would silently turn it into a regular file). A new file gets mode 0666 & ~umask,
  like open(); a replaced file keeps its mode.
"""
from __future__ import annotations

import json
import os
import stat
import tempfile
from typing import Any

from optcc.errors import OptccError

MAX_INPUT_BYTES = 1 << 30
MAX_DEPTH = 64


def read_text(path: str, field: str, what: str = "a JSON file") -> str:
    """The UTF-8 text of the regular file at `path` (at most MAX_INPUT_BYTES); OptccError otherwise."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise OptccError(field, f"no such file {path!r}") from None
    except OSError as e:
        raise OptccError(field, f"cannot read {path!r}: {e.strerror or e}") from None
    if stat.S_ISDIR(st.st_mode):
        raise OptccError(field, f"{path!r} is a directory, expected {what}")
    if not stat.S_ISREG(st.st_mode):
        raise OptccError(field, f"{path!r} is not a regular file (a FIFO or device is not read)")
    if st.st_size > MAX_INPUT_BYTES:
        raise OptccError(field, f"{path!r} is {st.st_size} bytes, more than the {MAX_INPUT_BYTES} accepted")
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_INPUT_BYTES + 1)
    except OSError as e:
        raise OptccError(field, f"cannot read {path!r}: {e.strerror or e}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise OptccError(field, f"{path!r} is not UTF-8 text (byte {e.start})") from None


def read_json(path: str, field: str) -> Any:
    """Parse the JSON file at `path`; bad input raises OptccError(field, reason)."""
    text = read_text(path, field)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise OptccError(field, f"not valid JSON: {e}") from None
    except RecursionError:
        raise OptccError(field, f"JSON nested more than {MAX_DEPTH} deep") from None
    except ValueError as e:                    # an integer literal over Python's 4300 digits
        raise OptccError(field, f"not acceptable JSON: {str(e).splitlines()[0].split(';')[0]}") from None
    check_depth(data, field)
    return data


def check_depth(data: object, field: str, limit: int = MAX_DEPTH) -> None:
    """Refuse JSON values nested deeper than `limit` (iteratively: no recursion to overflow)."""
    stack = [(data, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, (dict, list)):
            if d > limit:
                raise OptccError(field, f"JSON nested more than {limit} deep")
            stack.extend((x, d + 1) for x in (v.values() if isinstance(v, dict) else v))


def check_writable(path: str, field: str) -> os.stat_result | None:
    """Refuse, before any work, an output path write_text_atomic would refuse: a symlink, a
    directory, device, FIFO or socket, or a folder that does not exist. Returns its lstat or None."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise OptccError(field, f"cannot write {path!r}: {e.strerror or e}") from None
    if st is not None:
        if stat.S_ISLNK(st.st_mode):
            raise OptccError(field, f"{path!r} is a symbolic link; give the real path (it is not replaced)")
        if not stat.S_ISREG(st.st_mode):
            kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file (a device, FIFO or socket)"
            raise OptccError(field, f"{path!r} is {kind}; refusing to replace it")
    elif not os.path.isdir(os.path.dirname(os.path.abspath(path))):
        raise OptccError(field, f"cannot write {path!r}: its folder does not exist")
    return st


def write_text_atomic(path: str, text: str, field: str) -> None:
    """Write `text` to `path` atomically (see the module docstring for what is refused)."""
    write_bytes_atomic(path, text.encode("utf-8"), field)


def write_bytes_atomic(path: str, data: bytes, field: str) -> None:
    """Write `data` to `path` atomically, refusing what write_text_atomic refuses (a symlink, a
    non-regular file, a missing folder): a figure, say."""
    mode = None
    st = check_writable(path, field)
    if st is not None:
        mode = stat.S_IMODE(st.st_mode)
    if mode is None:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".optcc-", suffix=".tmp")
    except OSError as e:
        raise OptccError(field, f"cannot write {path!r}: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except OSError as e:
        _unlink(tmp)
        raise OptccError(field, f"cannot write {path!r}: {e.strerror or e}") from None
    except BaseException:
        _unlink(tmp)
        raise


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
