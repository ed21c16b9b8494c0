"""The one way the tool opens a file it reads: a regular file, within a size bound, BOM handled.

    python -c "import sys; from grpo_ablate.core.safe_read import read_text; print(len(read_text(sys.argv[1], 'a file')))" FILE

Every file a study names or leaves behind (the study file, a recipe, an accelerate config, a
dataset, a reward module, probe.json, advise.json, summary.json, the journal) is user-reachable
input: a FIFO there hangs a plain `open()` forever, a symlink to /dev/zero is read until memory
runs out, a folder raises IsADirectoryError half-way through a command. So the file is opened
without blocking (O_NONBLOCK: a FIFO with no writer opens at once), checked to be a regular file
on the descriptor itself (no window between a check and the open), and read to at most the bound
its format allows; anything else is a StudyError (exit 2) that names the path and what it is.
A UTF-8 byte-order mark (Excel's CSV, Windows editors) is dropped where the format allows one.

Stdlib and errors only, on the bottom floor, so every floor reads through it (prompt_file, cost,
storage, files, config).
"""

from __future__ import annotations

import io
import os
import stat
from typing import BinaryIO

from grpo_ablate.core.errors import Problem, StudyError, echo

__all__ = ["open_regular", "read_bytes", "read_text", "text_stream", "kind_problem", "MB", "BOM"]

MB = 1 << 20
BOM = b"\xef\xbb\xbf"


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def _refuse(path: str | os.PathLike[str], what: str, why: str, key: str = "") -> StudyError:
    return StudyError([Problem(path=key or str(path), message=f"the {what} {echo(str(path))} {why}")])


def kind_problem(path: str | os.PathLike[str]) -> str | None:
    """Why `path` (followed through symlinks) is not a regular file to read, or None; never opens it."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        return f"cannot be read ({getattr(e, 'strerror', None) or e})"
    return None if stat.S_ISREG(mode) else f"is {_kind(mode)}, not a regular file"


def open_regular(path: str | os.PathLike[str], what: str, *, key: str = "") -> BinaryIO:
    """The file opened for binary reading, once it is known to be a regular file.

    FileNotFoundError passes through (a missing file means different things to its callers);
    every other reason it cannot be read is a StudyError naming `what` and the path.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
    except (FileNotFoundError, NotADirectoryError):
        raise FileNotFoundError(2, "No such file", str(path)) from None
    except IsADirectoryError:
        raise _refuse(path, what, "is a folder, not a regular file", key) from None
    except (OSError, ValueError) as e:
        raise _refuse(path, what, f"cannot be read ({getattr(e, 'strerror', None) or e})", key) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise _refuse(path, what, f"is {_kind(mode)}, not a regular file; point it at a file", key)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: str | os.PathLike[str], what: str, limit: int, *, key: str = "") -> bytes:
    """The whole file, refused (StudyError) when it is longer than `limit` bytes."""
    with open_regular(path, what, key=key) as f:
        try:
            data = f.read(limit + 1)
        except OSError as e:
            raise _refuse(path, what, f"cannot be read ({e.strerror or e})", key) from None
    if len(data) > limit:
        raise _refuse(path, what, f"is larger than {_size(limit)}, more than a {what} can be; "
                                  "is it the right file?", key)
    return data


def _size(n: int) -> str:
    return f"{n // MB} MiB" if n % MB == 0 else f"{n // 1_000_000} MB" if n % 1_000_000 == 0 else f"{n} bytes"


def read_text(path: str | os.PathLike[str], what: str, limit: int, *, key: str = "") -> str:
    """The file as UTF-8 text, a leading byte-order mark dropped; StudyError when it is not UTF-8."""
    data = read_bytes(path, what, limit, key=key)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise _refuse(path, what, f"is not UTF-8 text (byte {e.start})", key) from None


def text_stream(path: str | os.PathLike[str], what: str, *, key: str = "") -> io.TextIOWrapper:
    """A regular file as a UTF-8 text stream (a BOM dropped) for formats read a row at a time."""
    return io.TextIOWrapper(open_regular(path, what, key=key), encoding="utf-8-sig", newline="")

