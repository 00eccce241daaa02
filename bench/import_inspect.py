"""Import speed and memory: a generated 100,000-sample Inspect ``.eval`` log through ``benchaudit import inspect``.

    .venv/bin/python bench/import_inspect.py [--samples 100000] [--keep DIR]

Builds an ``.eval`` archive shaped as inspect_ai 0.3.285 writes it (zstd entries, zip method 93;
``header.json``, ``reductions.json``, one ``samples/<id>_epoch_1.json`` per sample) from the real
sample of the fixture log ``tests/fixtures/imports/logs/inspect-new`` (its id, answer and score
varied per sample; the header's accuracy set to what the samples give), then runs the import in a
child process and reports wall and CPU time (the machine is shared: CPU time is what the import
itself costs), samples per second and the child's peak RSS
(``resource.getrusage(RUSAGE_CHILDREN).ru_maxrss``).  The archive is written with a small zip
writer here (the standard library writes method 93 only from Python 3.14).
"""

from __future__ import annotations

import argparse
import json
import resource
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

import zstandard

from pytest_benchaudit.audit.importers.eval_archive import EvalArchive

HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parent / "tests" / "fixtures" / "imports" / "logs" / "inspect-new"


class _ZstdZip:
    """Writes zip entries compressed with zstd (method 93), then the central directory."""

    def __init__(self, path: Path) -> None:
        self.handle = open(path, "wb")
        self.entries: list[tuple[bytes, int, int, int, int]] = []
        self.compressor = zstandard.ZstdCompressor(level=3)

    def add(self, name: str, data: bytes) -> None:
        packed = self.compressor.compress(data)
        offset = self.handle.tell()
        encoded, crc = name.encode(), zlib.crc32(data)
        self.handle.write(struct.pack("<4s2B4HL2L2H", b"PK\x03\x04", 63, 0, 0, 93, 0, 0, crc, len(packed),
                                      len(data), len(encoded), 0) + encoded + packed)
        self.entries.append((encoded, crc, len(packed), len(data), offset))

    def close(self) -> None:
        start = self.handle.tell()
        for encoded, crc, packed, size, offset in self.entries:
            self.handle.write(struct.pack("<4s4B4HL2L5H2L", b"PK\x01\x02", 63, 3, 63, 0, 0, 93, 0, 0, crc, packed,
                                          size, len(encoded), 0, 0, 0, 0, 0, offset) + encoded)
        end = self.handle.tell()
        count = len(self.entries)
        if count > 0xFFFF:  # zip64: the end record's 16-bit counts cannot hold it
            self.handle.write(struct.pack("<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, count, count,
                                          end - start, start))
            self.handle.write(struct.pack("<4sLQL", b"PK\x06\x07", 0, end, 1))
            count = 0xFFFF
        self.handle.write(struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, count, count, end - start, start, 0))
        self.handle.close()


def build(path: Path, n: int) -> None:
    source = next(p for p in sorted(FIXTURES.glob("*.eval")))
    with EvalArchive(source) as archive:
        header = json.loads(archive.read("header.json"))
        sample = json.loads(archive.read("samples/toy-1_epoch_1.json"))
    header["eval"]["config"]["epochs"] = 1
    header["eval"]["task"] = "bench_mcq"
    letters = "ABCD"
    correct = 0
    zipped = _ZstdZip(path)
    reductions = []
    for i in range(n):
        answer, target = letters[i % 4], letters[(i // 3) % 4]
        value = "C" if answer == target else "I"
        correct += value == "C"
        sample.update({"id": f"q{i}", "epoch": 1, "target": target,
                       "scores": {"choice": {"value": value, "answer": answer, "explanation": f"ANSWER: {answer}"}}})
        sample["output"]["completion"] = f"ANSWER: {answer}"
        zipped.add(f"samples/q{i}_epoch_1.json", json.dumps(sample).encode())
        reductions.append({"value": 1.0 if value == "C" else 0.0, "sample_id": f"q{i}"})
    score = header["results"]["scores"][0]
    score["scored_samples"], score["unscored_samples"] = n, 0
    score["metrics"]["accuracy"]["value"] = correct / n
    header["results"]["total_samples"] = header["results"]["completed_samples"] = n
    zipped.add("reductions.json", json.dumps([{"scorer": "choice", "samples": reductions}]).encode())
    zipped.add("header.json", json.dumps(header).encode())
    zipped.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=100_000)
    parser.add_argument("--keep", type=Path, help="write the log and the run directory here (default: a temp folder)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        log = work / "bench.eval"
        started = time.perf_counter()
        build(log, args.samples)
        print(f"built {log.name}: {args.samples} samples, {log.stat().st_size / 1e6:.1f} MB "
              f"in {time.perf_counter() - started:.1f} s")
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "pytest_benchaudit.cli", "import", "inspect", str(log),
                        "--report-dir", str(work / "reports")], check=True, stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - started
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = usage.ru_utime + usage.ru_stime
        print(f"import: {wall:.1f} s wall, {cpu:.1f} s CPU (start-up included); {args.samples / wall:,.0f} samples/s "
              f"of wall time, {args.samples / cpu:,.0f} per CPU second; peak RSS {usage.ru_maxrss / 1024:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
