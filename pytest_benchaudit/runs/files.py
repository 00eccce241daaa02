"""Opening a run directory's files for reading, whatever stands in their place.

Every command reads ``run.json``, ``records.jsonl`` and ``summary.json`` from a path the user
gives, and what is there is not always a file the store wrote.  Each of these, read naively,
hangs a command or fills its memory:

- a named pipe (FIFO): ``open()`` waits for a writer that may never come;
- a device (a symbolic link to ``/dev/zero``): reading never ends;
- a sparse or damaged file (gigabytes of NUL bytes, as a crash on some file systems leaves at the
  end of a file being appended to): one "line" of gigabytes, read whole into memory.

So a file is opened without blocking (``O_NONBLOCK``: a FIFO opens at once instead of waiting),
checked to be a regular file on the descriptor itself (no race between a check and the open),
JSON documents are refused past :data:`MAX_DOCUMENT_BYTES` before they are read, and
``records.jsonl`` is read a bounded piece at a time: a NUL byte (never in JSON text) or a line
longer than :data:`MAX_LINE_BYTES` is one :class:`RunDirError` naming ``file:line``, after
reading at most that much.  The limits are far above what a run writes (a record holds one
prompt and its answers: kilobytes; the largest ``run.json`` of the packaged suites' runs is
well under a megabyte).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from pytest_benchaudit.common.errors import RunDirError

__all__ = ["MAX_DOCUMENT_BYTES", "MAX_LINE_BYTES", "bounded_lines", "open_regular", "read_regular"]

#: A ``run.json`` or ``summary.json`` larger than this is refused before it is read.
MAX_DOCUMENT_BYTES = 256 << 20
#: A line of ``records.jsonl`` longer than this is refused once that much of it was read.
MAX_LINE_BYTES = 64 << 20
_PIECE = 1 << 20  # what one read of a line takes at most

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def open_regular(path: Path) -> IO[bytes]:
    """``path`` opened for reading (binary) if it is a regular file; else one
    :class:`RunDirError` naming what it is.  Never blocks: a FIFO is refused, not waited on.
    ``FileNotFoundError`` is left to the caller (each says what a missing file means)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except IsADirectoryError:
        raise RunDirError(
            f"{path}: a directory, not a file; a run directory's {Path(path).name} is a file the run writes"
        ) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise RunDirError(
                f"{path}: {_kind(info.st_mode)}, not a file; a run directory's {Path(path).name} is "
                "a file the run writes (nothing was read from it)"
            )
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)  # a regular file: reads as usual
        return open(fd, "rb")  # noqa: SIM115 - the caller closes it
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: Path, limit: int = MAX_DOCUMENT_BYTES) -> bytes:
    """The bytes of the regular file ``path``, refused (:class:`RunDirError`) past ``limit`` bytes
    before any is read (a sparse file's size is what it claims, so it is refused too)."""
    with open_regular(path) as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > limit:
            raise RunDirError(
                f"{path}: {size:,} bytes, more than a benchaudit document holds (at most "
                f"{limit >> 20} MiB); not read (a sparse or damaged file, or not the run's own?)"
            )
        return fh.read(limit + 1)


def bounded_lines(fh: IO[bytes], path: Path, limit: int = MAX_LINE_BYTES) -> Iterator[bytes]:
    """The lines of the binary file ``fh``, read a bounded piece at a time: a NUL byte, or a line
    longer than ``limit``, is a :class:`RunDirError` naming ``path:line`` and the byte its line starts
    at, as soon as it is met, so a sparse file's gigabytes of zeros are never held in memory."""
    lineno = 0
    offset = 0  # of the line's first byte
    while True:
        piece = fh.readline(_PIECE)
        if not piece:
            return
        lineno += 1
        parts = [piece]
        size = len(piece)
        _check_nul(piece, path, lineno, offset)
        while not piece.endswith(b"\n") and len(piece) == _PIECE:  # a long line: read on, within the limit
            if size >= limit:
                raise RunDirError(
                    f"{path}:{lineno}: a line longer than {limit >> 20} MiB (from byte {offset:,}); "
                    "not a record line (a damaged file, or not the run's own?)"
                )
            piece = fh.readline(_PIECE)
            if not piece:
                break
            _check_nul(piece, path, lineno, offset)
            parts.append(piece)
            size += len(piece)
        offset += size
        yield parts[0] if len(parts) == 1 else b"".join(parts)


def _check_nul(piece: bytes, path: Path, lineno: int, offset: int) -> None:
    if b"\0" in piece:
        keep = (
            f"the {lineno - 1} line(s) before it are untouched: truncating the file to {offset:,} bytes keeps them"
            if lineno > 1
            else "nothing before it to keep"
        )
        raise RunDirError(
            f"{path}:{lineno}: NUL bytes (line {lineno} starts at byte {offset:,}): not JSON lines but "
            f"a damaged or sparse file (a crash can leave zeros at the end of a file); {keep}"
        )
