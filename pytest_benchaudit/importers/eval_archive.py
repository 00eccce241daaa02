"""Reading the entries of an Inspect ``.eval`` archive one at a time, without inspect_ai.

An ``.eval`` log is a zip archive: ``header.json`` (the eval's spec, plan, results and stats),
``_journal/start.json`` (the spec as the eval started), ``summaries.json`` and
``reductions.json`` (the epochs reducer's values), and one entry per sample and epoch,
``samples/<id>_epoch_<n>.json``.  inspect_ai writes its entries deflate-compressed (zip method 8)
up to early 2026 and zstd-compressed (method 93) since; the standard library's
:mod:`zipfile` reads method 93 only from Python 3.14.  So the central directory (names, offsets,
sizes, CRC-32s) is read with :mod:`zipfile`, which needs no decompressor for that, and each entry's
bytes are read at its offset and decompressed here: stored, deflate (:mod:`zlib`) or zstd (the
``zstandard`` package; an entry may hold several zstd frames, as inspect_ai writes large ones).
The size and CRC-32 the directory states are checked, so a corrupt entry is an error naming it.

An archive whose end is missing (a copy cut short, a disk that filled up) has no central
directory: :class:`ArchiveError` says so.  One entry is held in memory at a time.
"""

from __future__ import annotations

import struct
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from pytest_benchaudit.importers.common import ImportSourceError

__all__ = ["ArchiveError", "EvalArchive", "is_zip"]

STORED, DEFLATED, ZSTD = 0, 8, 93
_LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")  # the 30 bytes before a local entry's name
_LOCAL_SIGNATURE = b"PK\x03\x04"


class ArchiveError(ImportSourceError):
    """The archive is cut, corrupt, or holds an entry this reader cannot decompress."""


def is_zip(path: Path) -> bool:
    """True when ``path`` starts with a zip local-file signature (what an ``.eval`` log is)."""
    try:
        with open(path, "rb") as handle:
            return handle.read(4) == _LOCAL_SIGNATURE
    except OSError:
        return False


class EvalArchive:
    """An ``.eval`` archive opened for reading entry by entry (a context manager)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        try:
            self._handle: BinaryIO = open(self.path, "rb")
        except OSError as err:
            raise ArchiveError(f"{self.path}: cannot open ({err.strerror or err})") from None
        try:
            with zipfile.ZipFile(self._handle) as directory:
                self._infos = {info.filename: info for info in directory.infolist()}
        except zipfile.BadZipFile as err:
            self._handle.close()
            raise ArchiveError(
                f"{self.path}: not a complete .eval archive ({err}): the file is cut short or "
                "corrupt (its zip central directory cannot be read)"
            ) from None

    def __enter__(self) -> EvalArchive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._handle.close()

    def names(self) -> list[str]:
        """Every entry's name, in the archive's order."""
        return list(self._infos)

    def has(self, name: str) -> bool:
        return name in self._infos

    def read(self, name: str) -> bytes:
        """The decompressed bytes of entry ``name`` (checked against the directory's size and CRC-32)."""
        info = self._infos.get(name)
        if info is None:
            raise ArchiveError(f"{self.path}: no entry {name!r} in the archive")
        where = f"{self.path}: entry {name!r}"
        self._handle.seek(info.header_offset)
        header = self._handle.read(_LOCAL_HEADER.size)
        if len(header) < _LOCAL_HEADER.size:
            raise ArchiveError(f"{where}: cut short (its local header is missing)")
        fields = _LOCAL_HEADER.unpack(header)
        if fields[0] != _LOCAL_SIGNATURE:
            raise ArchiveError(f"{where}: corrupt (no local header at offset {info.header_offset})")
        name_length, extra_length = fields[-2], fields[-1]
        self._handle.seek(name_length + extra_length, 1)
        raw = self._handle.read(info.compress_size)
        if len(raw) < info.compress_size:
            raise ArchiveError(f"{where}: cut short ({len(raw)} of {info.compress_size} compressed bytes)")
        data = _decompress(raw, info.compress_type, where, info.file_size)
        if len(data) != info.file_size or zlib.crc32(data) != info.CRC:
            raise ArchiveError(f"{where}: corrupt (size or CRC-32 differs from the archive's directory)")
        return data

    def iter_entries(self, prefix: str) -> Iterator[tuple[str, bytes]]:
        """``(name, bytes)`` of every entry whose name starts with ``prefix``, one at a time."""
        for name in self._infos:
            if name.startswith(prefix) and not name.endswith("/"):
                yield name, self.read(name)


def _decompress(raw: bytes, method: int, where: str, size: int) -> bytes:
    if method == STORED:
        return raw
    try:
        if method == DEFLATED:
            inflater = zlib.decompressobj(-15)
            return inflater.decompress(raw) + inflater.flush()
        if method == ZSTD:
            return _unzstd(raw, size)
    except (zlib.error, ValueError) as err:
        raise ArchiveError(f"{where}: corrupt ({err})") from None
    raise ArchiveError(
        f"{where}: zip compression method {method} is not one inspect_ai writes (stored 0, deflate 8, zstd 93)"
    )


_DECOMPRESSOR: list[object] = []  # one zstandard.ZstdDecompressor, made at the first zstd entry


def _unzstd(raw: bytes, size: int) -> bytes:
    """Every zstd frame of ``raw`` decompressed and joined (inspect_ai splits large entries into frames);
    ``size``: the entry's size as the directory states it."""
    import zstandard  # only .eval archives of 2026 and later need it

    if not _DECOMPRESSOR:
        _DECOMPRESSOR.append(zstandard.ZstdDecompressor())
    decompressor = _DECOMPRESSOR[0]
    assert isinstance(decompressor, zstandard.ZstdDecompressor)
    try:
        # One frame holding the whole entry is the common case and the fast path; a first frame shorter
        # than the entry means more frames follow.
        data: bytes = decompressor.decompress(raw, max_output_size=size)
        if len(data) == size:
            return data
        return decompressor.stream_reader(raw, read_across_frames=True).readall()
    except zstandard.ZstdError as err:
        raise ValueError(f"zstd: {err}") from None
