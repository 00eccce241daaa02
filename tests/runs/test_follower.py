"""RecordsFollower: records.jsonl read while it grows gives what one read_records pass at the end gives.

The file is written the way a run writes it (flushes that can cut a line, or a character, in two)
and read at every flush; the records, the errors and the torn-tail messages must be those of
:func:`read_records` over the finished file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_benchaudit.runs.store import BadRecord, DuplicateRecords, RecordsFollower, read_records

RECORD = st.fixed_dictionaries(
    {
        "question_id": st.text(max_size=6),
        "raw_output": st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20),
        "score": st.floats(allow_nan=False, allow_infinity=False),
    }
)


def _follow(path: Path, pieces: list[bytes], **kw: Any) -> tuple[list[dict[str, Any]], list[str]]:
    """Write ``pieces`` one flush at a time, reading what is new after each; then the rest."""
    said: list[str] = []
    follower = RecordsFollower(path, on_torn_tail=said.append, **kw)
    got: list[dict[str, Any]] = []
    path.write_bytes(b"")
    with path.open("ab") as fh:
        for piece in pieces:
            fh.write(piece)
            fh.flush()
            got.extend(follower.new())
    got.extend(follower.rest())
    return got, said


def _cut(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(c, len(data)) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in zip(points, points[1:])]


@settings(max_examples=60, deadline=None)
@given(
    records=st.lists(RECORD, max_size=12, unique_by=lambda r: r["question_id"]),
    cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=8),
    torn=st.booleans(),
    blank=st.booleans(),
)
def test_followed_file_reads_as_read_records(
    tmp_path_factory: pytest.TempPathFactory, records: list[dict[str, Any]], cuts: list[int], torn: bool, blank: bool
) -> None:
    data = b"".join(orjson.dumps(r) + b"\n" + (b"\n" if blank else b"") for r in records)
    if torn:
        data += b'{"question_id": "cut sh'  # a killed run's last write
    path = tmp_path_factory.mktemp("follow") / "records.jsonl"
    got, said = _follow(path, _cut(data, cuts))
    expected_said: list[str] = []
    assert got == list(read_records(path, on_torn_tail=expected_said.append, validate=False)) == records
    assert said == expected_said
    assert len(said) == int(torn)


def test_a_line_cut_inside_a_character_waits_for_its_end(tmp_path: Path) -> None:
    line = orjson.dumps({"raw_output": "ünïcödé ✓"}) + b"\n"
    middle = line.index("✓".encode()) + 1  # inside the three bytes of the check mark
    got, said = _follow(tmp_path / "records.jsonl", [line[:middle], line[middle:], line])
    assert got == [{"raw_output": "ünïcödé ✓"}] * 2 and said == []


def test_a_last_record_without_its_newline_is_read(tmp_path: Path) -> None:
    got, _ = _follow(tmp_path / "records.jsonl", [b'{"a": 1}\n{"a"', b": 2}"])
    assert got == [{"a": 1}, {"a": 2}]


def test_a_bad_line_is_the_error_read_records_gives(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    with pytest.raises(BadRecord) as followed:
        _follow(path, [b'{"a": 1}\n', b"not json\n", b'{"a": 2}\n'])
    with pytest.raises(BadRecord) as whole:
        list(read_records(path, validate=False))
    assert str(followed.value) == str(whole.value) and ":2: invalid JSON" in str(whole.value)


def test_bad_lines_skipped_are_counted_once(tmp_path: Path) -> None:
    said: list[str] = []
    path = tmp_path / "records.jsonl"
    path.write_bytes(b'{"a": 1}\n[1]\nnot json\n{"a": 2}\n')
    follower = RecordsFollower(path, validate=True, skip_bad=True, on_torn_tail=said.append)
    assert list(follower.new()) == [] and len(said) == 0  # {"a": 1} is JSON but not a record under validation
    assert list(follower.rest()) == []
    assert len(said) == 1 and "skipped 4 line(s)" in said[0]


def test_new_reads_at_most_about_its_limit(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    lines = [orjson.dumps({"i": i}) + b"\n" for i in range(100)]
    path.write_bytes(b"".join(lines))
    follower = RecordsFollower(path)
    first = list(follower.new(limit=len(lines[0]) * 10))
    assert [r["i"] for r in first] == list(range(10))
    assert [r["i"] for r in follower.rest()] == list(range(10, 100))


def test_a_missing_file_is_one_clear_error(tmp_path: Path) -> None:
    from pytest_benchaudit.common.errors import RunDirError

    with pytest.raises(RunDirError, match="records.jsonl: not found"):
        list(RecordsFollower(tmp_path / "records.jsonl").new())


def test_the_rest_is_read_in_blocks_not_held_whole(tmp_path: Path) -> None:
    """The end of an xdist run reads the whole file through ``rest()``: memory stays near one
    block, not the file's size (a 161,670-record file read at once held ~0.5 GB)."""
    import tracemalloc

    path = tmp_path / "records.jsonl"
    line = orjson.dumps({"raw_output": "x" * 1000, "i": 0}) + b"\n"
    path.write_bytes(line * 20_000)  # ~20 MB
    tracemalloc.start()
    try:
        count = sum(1 for _ in RecordsFollower(path).rest())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 20_000
    assert peak < 6 << 20, f"peak {peak >> 20} MiB while reading a {path.stat().st_size >> 20} MiB file"


def test_lines_longer_than_a_block_and_cut_at_block_edges(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_benchaudit.runs import store

    monkeypatch.setattr(store, "_BLOCK_BYTES", 7)  # every line spans blocks, some edges cut a character
    path = tmp_path / "records.jsonl"
    records = [{"i": i, "raw_output": "é" * (i % 5) + "answer " * i} for i in range(30)]
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records) + b'{"i": 30')  # and a torn tail
    said: list[str] = []
    follower = RecordsFollower(path, on_torn_tail=said.append)
    got = list(follower.new(limit=50)) + list(follower.rest())
    assert got == records == list(read_records(path, on_torn_tail=lambda _: None, validate=False))
    assert len(said) == 1


def test_a_repeated_item_is_the_error_read_records_gives(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    lines = [b'{"question_id": "a"}\n', b'{"question_id": "b"}\n', b'{"question_id": "a"}\n']
    with pytest.raises(DuplicateRecords) as followed:
        _follow(path, lines)
    with pytest.raises(DuplicateRecords) as whole:
        list(read_records(path, validate=False))
    assert str(followed.value) == str(whole.value) and "a [None] (lines 1 and 3)" in str(whole.value)
    said: list[str] = []
    kept = list(read_records(path, validate=False, skip_bad=True, on_skipped=said.append))
    got, followed_said = _follow(path, lines, skip_bad=True)
    assert got == kept == [{"question_id": "a"}, {"question_id": "b"}] and followed_said == said
