"""Import speed and memory: a generated 100,000-sample Inspect ``.eval`` log through ``benchaudit import inspect``.

    .venv/bin/python bench/import_inspect.py [--samples 100000] [--keep DIR]

Builds an ``.eval`` archive shaped as inspect_ai 0.3.285 writes it (zstd entries, zip method 93;
``header.json``, ``reductions.json``, one ``samples/<id>_epoch_1.json`` per sample) from the real
sample of the fixture log ``tests/fixtures/imports/logs/inspect-new`` (its id, answer and score
varied per sample; the header's accuracy set to what the samples give), then runs the import in a
child process and reports wall time and the CPU time of its two processes (the records are made in the
main one while a forked reader decompresses and parses the samples: :mod:`.sample_feed`), samples per
second (of wall time, and what the busier process allows on two free cores: the machine is shared, so
wall time alone says little) and each process's peak RSS (``resource.getrusage``).  The archive is written with a small zip
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

from pytest_benchaudit.importers.eval_archive import EvalArchive

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
        self.handle.write(
            struct.pack("<4s2B4HL2L2H", b"PK\x03\x04", 63, 0, 0, 93, 0, 0, crc, len(packed), len(data), len(encoded), 0)
            + encoded
            + packed
        )
        self.entries.append((encoded, crc, len(packed), len(data), offset))

    def close(self) -> None:
        start = self.handle.tell()
        for encoded, crc, packed, size, offset in self.entries:
            self.handle.write(
                struct.pack(
                    "<4s4B4HL2L5H2L",
                    b"PK\x01\x02",
                    63,
                    3,
                    63,
                    0,
                    0,
                    93,
                    0,
                    0,
                    crc,
                    packed,
                    size,
                    len(encoded),
                    0,
                    0,
                    0,
                    0,
                    0,
                    offset,
                )
                + encoded
            )
        end = self.handle.tell()
        count = len(self.entries)
        if count > 0xFFFF:  # zip64: the end record's 16-bit counts cannot hold it
            self.handle.write(
                struct.pack("<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, count, count, end - start, start)
            )
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
        sample.update(
            {
                "id": f"q{i}",
                "epoch": 1,
                "target": target,
                "scores": {"choice": {"value": value, "answer": answer, "explanation": f"ANSWER: {answer}"}},
            }
        )
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


def measure(log: Path, reports: Path) -> dict[str, float]:
    """Import ``log`` in this process: wall time, this process's CPU, the reader child's, peak RSS of each."""
    from pytest_benchaudit.importers.imported_runs import ImportOptions
    from pytest_benchaudit.importers.inspect_log import INSPECT

    started, cpu = time.perf_counter(), time.process_time()
    INSPECT.import_logs([log], ImportOptions(reports, HERE.parent / "suites", reports, "bench"))
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    me, child = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "wall": wall,
        "main_cpu": cpu,
        "reader_cpu": child.ru_utime + child.ru_stime,
        "main_rss_mb": me.ru_maxrss / 1024,
        "reader_rss_mb": child.ru_maxrss / 1024,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=100_000)
    parser.add_argument("--keep", type=Path, help="write the log and the run directory here (default: a temp folder)")
    parser.add_argument("--measure", nargs=2, type=Path, metavar=("LOG", "REPORTS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure:  # the child: one import, its figures as JSON
        print(json.dumps(measure(*args.measure)))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        log = work / "bench.eval"
        started = time.perf_counter()
        build(log, args.samples)
        print(
            f"built {log.name}: {args.samples} samples, {log.stat().st_size / 1e6:.1f} MB "
            f"in {time.perf_counter() - started:.1f} s"
        )
        out = subprocess.run(
            [sys.executable, __file__, "--measure", str(log), str(work / "reports")],
            check=True,
            stdout=subprocess.PIPE,
            text=True,
        ).stdout
        m = json.loads(out.strip().splitlines()[-1])
        n = args.samples
        print(
            f"import: {m['wall']:.1f} s wall ({n / m['wall']:,.0f} samples/s); CPU: main process "
            f"{m['main_cpu']:.1f} s ({m['main_cpu'] / n * 1e6:.0f} us a sample), reader process "
            f"{m['reader_cpu']:.1f} s ({m['reader_cpu'] / n * 1e6:.0f} us a sample); on two free cores "
            f"{n / max(m['main_cpu'], m['reader_cpu']):,.0f} samples/s; peak RSS main "
            f"{m['main_rss_mb']:.0f} MB, reader {m['reader_rss_mb']:.0f} MB"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
