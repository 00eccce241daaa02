"""The import fixtures name no machine: no absolute path of this or any machine in a tracked log, the ``.eval``
archives' compressed entries included (Inspect writes an errored sample's traceback, with the virtualenv's path,
into the log; tests/fixtures/imports/README.md says how they are scrubbed)."""

from __future__ import annotations

import re
import struct
import zipfile
import zlib
from pathlib import Path

import pytest
import zstandard

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "imports"
MACHINE_PATH = re.compile(rb"(?<![A-Za-z0-9_.])/(?:work|tmp|home|root|Users|private|var/folders)/")


def _entries(path: Path) -> dict[str, bytes]:
    """Each entry of an .eval archive, decompressed here (zipfile reads deflate; zstd, method 93, by hand)."""
    out = {}
    with zipfile.ZipFile(path) as archive, open(path, "rb") as handle:
        for info in archive.infolist():
            if info.compress_type != 93:
                out[info.filename] = archive.read(info.filename)
                continue
            handle.seek(info.header_offset)
            name_len, extra_len = struct.unpack("<HH", handle.read(30)[26:30])
            handle.seek(info.header_offset + 30 + name_len + extra_len)
            data = zstandard.ZstdDecompressor().decompressobj().decompress(handle.read(info.compress_size))
            assert zlib.crc32(data) == info.CRC, f"{path.name}: {info.filename}: CRC-32"
            out[info.filename] = data
    return out


def _files() -> list[Path]:
    return sorted(p for p in FIXTURES.rglob("*") if p.is_file())


@pytest.mark.parametrize("path", _files(), ids=lambda p: str(p.relative_to(FIXTURES)))
def test_no_fixture_names_a_machine_path(path: Path) -> None:
    contents = _entries(path) if path.suffix == ".eval" else {"": path.read_bytes()}
    for entry, data in contents.items():
        hit = MACHINE_PATH.search(data)
        assert hit is None, f"{path.name} {entry}: {data[max(0, hit.start() - 40) : hit.end() + 60]!r}"


def test_the_scrubbed_tracebacks_are_still_there() -> None:
    """The scrub replaced the paths, not the traceback: the errored sample still says where it failed."""
    logs = sorted((FIXTURES / "logs").glob("inspect-*/*toy-mcq*.eval"))
    assert len(logs) == 4
    for log in logs:
        entry = _entries(log)["samples/toy-4_epoch_1.json"]
        assert b"VENV/lib/python3.11/site-packages/inspect_ai/" in entry
