"""``benchaudit fetch`` against a 127.0.0.1 HTTP server (no other network)."""

from __future__ import annotations

import hashlib
import json
import re
import textwrap
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import SUITES
from helpers.origin import Origin
from pytest_benchaudit.cli.app import main
from pytest_benchaudit.dataset import fetch as fetch_mod
from pytest_benchaudit.dataset.fetch import FetchError, fetch_plan, js_assignment_to_json
from pytest_benchaudit.dataset.suites import load_suite
from pytest_benchaudit.testing.data import real_data_dir

OWN_SUITES = ("seceval", "mmlu_cs", "cybermetric", "cti_bench", "athenabench", "secbench", "secure")


@pytest.fixture
def origin() -> Iterator[Origin]:
    with Origin() as server:
        yield server


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ----------------------------------------------------------------------------- toy suite
PLAIN = b"question,A,B,C,D,answer\nwhat?,a,b,c,d,B\n"
RECORDS = [{"id": "q1", "question": "Caf\u00e9 \u2014 which?", "answer": "AC"}, {"id": "q2", "answer": ""}]
DERIVED = json.dumps(RECORDS, indent=1, ensure_ascii=False).encode()
BIG = bytes(range(256)) * 64  # 16 KiB


def write_toy(root: Path, base_url: str = "https://example.invalid/OWNER/REPO/COMMIT/") -> Path:
    path = root / "suites" / "toy" / "suite.toml"
    path.parent.mkdir(parents=True)
    path.write_text(
        textwrap.dedent(f"""
        [benchmark]
        name = "toy"
        data_folder = "toy-data"
        [tasks.mcq]
        data = {{ file = "plain.csv", question = "q", gold = "a" }}

        [fetch]
        base_url = "{base_url}"
        [fetch.files]
        "plain.csv" = {{ path = "data/plain file.csv", sha256 = "{sha(PLAIN)}" }}
        "sub/questions.json" = {{ path = "docs/q.js", sha256 = "{sha(DERIVED)}", transform = "js_assignment_to_json" }}
        "big.bin" = {{ sha256 = "{sha(BIG)}" }}
    """)
    )
    return path


def serve_toy(origin: Origin) -> None:
    origin.routes = {
        "/base/data/plain%20file.csv": PLAIN,
        "/base/docs/q.js": b"problem_data = " + json.dumps(RECORDS).encode() + b";\n",
        "/base/big.bin": BIG,
    }


def run_fetch(root: Path, origin: Origin, *extra: str) -> int:
    return main(
        [
            "fetch",
            "toy",
            "--suites-dir",
            str(root / "suites"),
            "--data-dir",
            str(root / "data"),
            "--origin",
            origin.url,
            *extra,
        ]
    )


def listing(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_fetch_verify_and_rerun(tmp_path: Path, origin: Origin, capsys: pytest.CaptureFixture[str]) -> None:
    write_toy(tmp_path)
    serve_toy(origin)
    assert run_fetch(tmp_path, origin) == 0
    folder = tmp_path / "data" / "toy-data"
    assert listing(folder) == {"plain.csv": PLAIN, "sub/questions.json": DERIVED, "big.bin": BIG}
    out = capsys.readouterr().out
    assert out.count("fetched  toy-data/") == 3  # the folder on disk, not the suite name
    # re-run: everything present, nothing downloaded or rewritten
    mtimes = {p: p.stat().st_mtime_ns for p in folder.rglob("*")}
    origin.requests.clear()
    assert run_fetch(tmp_path, origin) == 0
    assert origin.requests == []
    assert {p: p.stat().st_mtime_ns for p in folder.rglob("*")} == mtimes
    assert capsys.readouterr().out.count("present  toy-data/") == 3


def test_corrupted_file_refused_then_forced(tmp_path: Path, origin: Origin, capsys: pytest.CaptureFixture[str]) -> None:
    write_toy(tmp_path)
    serve_toy(origin)
    folder = tmp_path / "data" / "toy-data"
    folder.mkdir(parents=True)
    (folder / "plain.csv").write_bytes(b"edited by hand\n")
    assert run_fetch(tmp_path, origin) == 1
    err = capsys.readouterr().err
    assert "toy/plain.csv" in err and "refusing to overwrite it (use --force to replace it)" in err
    assert (folder / "plain.csv").read_bytes() == b"edited by hand\n"
    assert (folder / "big.bin").read_bytes() == BIG  # the other files were still fetched
    assert run_fetch(tmp_path, origin, "--force") == 0
    assert "replaced toy-data/plain.csv" in capsys.readouterr().out
    assert (folder / "plain.csv").read_bytes() == PLAIN
    assert not list(folder.rglob(".*.part"))


def test_404_is_one_clear_error_and_leaves_no_file(
    tmp_path: Path, origin: Origin, capsys: pytest.CaptureFixture[str]
) -> None:
    write_toy(tmp_path)
    serve_toy(origin)
    del origin.routes["/base/big.bin"]
    assert run_fetch(tmp_path, origin) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == f"benchaudit fetch: toy/big.bin: download failed: HTTP 404 from {origin.url}big.bin"
    folder = tmp_path / "data" / "toy-data"
    assert set(listing(folder)) == {"plain.csv", "sub/questions.json"}  # no big.bin, no temp file


def test_wrong_content_is_a_checksum_error_and_leaves_no_file(
    tmp_path: Path, origin: Origin, capsys: pytest.CaptureFixture[str]
) -> None:
    write_toy(tmp_path)
    serve_toy(origin)
    origin.routes["/base/data/plain%20file.csv"] = PLAIN.replace(b"B\n", b"C\n")
    origin.routes["/base/docs/q.js"] = b"problem_data = [1, 2];"
    assert run_fetch(tmp_path, origin) == 1
    err = capsys.readouterr().err
    assert f"toy/plain.csv: checksum mismatch for the file from {origin.url}data/plain%20file.csv" in err
    assert f"expected {sha(PLAIN)}; nothing was written" in err
    assert "toy/sub/questions.json: checksum mismatch" in err and "after js_assignment_to_json" in err
    assert set(listing(tmp_path / "data" / "toy-data")) == {"big.bin"}


def test_wrong_existing_file_is_kept_when_the_forced_download_fails(tmp_path: Path, origin: Origin) -> None:
    write_toy(tmp_path)
    serve_toy(origin)
    folder = tmp_path / "data" / "toy-data"
    folder.mkdir(parents=True)
    (folder / "big.bin").write_bytes(b"old")
    origin.routes["/base/big.bin"] = b"truncated"
    assert run_fetch(tmp_path, origin, "--force") == 1
    assert (folder / "big.bin").read_bytes() == b"old"
    assert sorted(p.name for p in folder.iterdir()) == ["big.bin", "plain.csv", "sub"]


def test_unreachable_origin_and_progress(
    tmp_path: Path, origin: Origin, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    write_toy(tmp_path)
    serve_toy(origin)
    monkeypatch.setattr(fetch_mod, "PROGRESS_MIN_BYTES", 1000)
    assert run_fetch(tmp_path, origin) == 0
    assert "toy/big.bin: 0.0 of 0.0 MB" in capsys.readouterr().err  # 16 KiB > the lowered threshold
    url = origin.url
    origin.__exit__()
    (tmp_path / "data" / "toy-data" / "big.bin").unlink()
    assert (
        main(
            [
                "fetch",
                "toy",
                "--suites-dir",
                str(tmp_path / "suites"),
                "--data-dir",
                str(tmp_path / "data"),
                "--origin",
                url,
            ]
        )
        == 1
    )
    err = capsys.readouterr().err
    assert f"toy/big.bin: download failed from {url}big.bin: ConnectError" in err
    assert not (tmp_path / "data" / "toy-data" / "big.bin").exists()


def test_manual_files(tmp_path: Path, origin: Origin, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_toy(tmp_path)
    path.write_text(
        path.read_text()
        + textwrap.dedent(f"""
        "lookup.json" = {{ manual = "derived from a pickle upstream; convert it with the suite's notes", sha256 = "{sha(b'{}')}" }}
    """)
    )
    serve_toy(origin)
    assert run_fetch(tmp_path, origin) == 1
    err = capsys.readouterr().err
    assert "toy/lookup.json:" in err and "is missing; it is not fetched automatically: derived from a pickle" in err
    assert not any("lookup" in r for r in origin.requests)
    (tmp_path / "data" / "toy-data" / "lookup.json").write_bytes(b"{}")
    assert run_fetch(tmp_path, origin) == 0
    assert "present  toy-data/lookup.json" in capsys.readouterr().out


@pytest.mark.parametrize(
    "entry, message",
    [
        ('"x" = { sha256 = "abc" }', "sha256 must be 64 lower-case hex digits"),
        ('"x" = { path = "x" }', "sha256 is required"),
        ('"../x" = { sha256 = "' + "0" * 64 + '" }', "relative path inside the data folder"),
        (
            '"x" = { sha256 = "' + "0" * 64 + '", transform = "unpickle" }',
            "unknown transform 'unpickle'; transforms: js_assignment_to_json",
        ),
        ('"x" = { sha256 = "' + "0" * 64 + '", url = "http://x" }', "unknown keys url"),
    ],
)
def test_bad_fetch_config_is_a_usage_error(
    tmp_path: Path, entry: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "suites" / "toy" / "suite.toml"
    path.parent.mkdir(parents=True)
    path.write_text(
        f'[benchmark]\nname = "toy"\n[tasks.mcq]\ndata = {{ file = "x", question = "q", gold = "a" }}\n'
        f'[fetch]\nbase_url = "https://example.invalid/"\n[fetch.files]\n{entry}\n'
    )
    assert main(["fetch", "toy", "--suites-dir", str(tmp_path / "suites"), "--data-dir", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err


def test_unknown_suite_and_suite_without_fetch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fetch", "nope", "--data-dir", str(tmp_path), "--suites-dir", str(SUITES)]) == 2
    assert "no suite 'nope'" in capsys.readouterr().err
    path = tmp_path / "suites" / "toy" / "suite.toml"
    path.parent.mkdir(parents=True)
    path.write_text('[benchmark]\nname = "toy"\n[tasks.mcq]\ndata = { file = "x", question = "q", gold = "a" }\n')
    with pytest.raises(FetchError, match=r"toy has no \[fetch\] table"):
        fetch_plan(load_suite(path))


def test_js_assignment_to_json() -> None:
    assert (
        js_assignment_to_json(b"var x = [1, {\"a\": \"\\u00e9\"}];\n") == '[\n 1,\n {\n  "a": "\u00e9"\n }\n]'.encode()
    )
    assert js_assignment_to_json(b"\xef\xbb\xbfleaderboard = {\"k\": 1}") == b'{\n "k": 1\n}'
    for bad, msg in (
        (b"[1]", "does not start with an assignment"),
        (b"x = [1,]", "not JSON"),
        (b"x = 3", "expected an array"),
    ):
        with pytest.raises(ValueError, match=msg):
            js_assignment_to_json(bad)


# ----------------------------------------------------------------------------- the real suites
def provenance_checksums(folder: Path) -> dict[str, str]:
    text = (folder / "PROVENANCE.md").read_text(encoding="utf-8")
    return {m.group(2): m.group(1) for m in re.finditer(r"^([0-9a-f]{64})\s+(\S.*?)\s*$", text, re.MULTILINE)}


@pytest.mark.parametrize("bench", OWN_SUITES)
def test_real_suite_fetch_from_a_local_mirror(
    bench: str, tmp_path: Path, origin: Origin, capsys: pytest.CaptureFixture[str]
) -> None:
    """Serve the shared copies at the suite's base_url-relative paths (derived files as a
    reconstructed JavaScript source) and fetch them: every checksum must hold.  Files marked
    ``manual`` are never requested; they count as present once put in place by hand."""
    shared = real_data_dir()
    suite = load_suite(SUITES / bench / "suite.toml")
    plan = fetch_plan(suite)
    assert (
        plan.base_url.startswith("https://raw.githubusercontent.com/")
        and suite.info["revision"][:7] in plan.base_url
        or bench == "mmlu_cs"
    )  # MMLU: the data commit (785eba5), not evaluate.py's
    source = shared / suite.data_folder
    if not source.is_dir():
        pytest.skip(f"real-data folder missing: {source}")
    provenance = (source / "PROVENANCE.md").read_text(encoding="utf-8")
    auto = [f for f in plan.files if f.manual is None]
    manual = [f for f in plan.files if f.manual is not None]
    assert {f.name: f.sha256 for f in auto} == provenance_checksums(source)
    for f in auto:  # the origin path is the one PROVENANCE.md names (CTI-Bench: `evaluation/responses/…`)
        assert f"`{f.path}`" in provenance or f"`{f.path.rsplit('/', 1)[0]}/\u2026`" in provenance, f.path
    for f in manual:  # derived files: named in PROVENANCE.md, no upstream checksum to pin
        assert f.name in provenance and f.sha256 is None and (source / f.name).is_file()
    for f in auto:
        body = (source / f.name).read_bytes()
        if f.transform == "js_assignment_to_json":
            body = b"problem_data = " + json.dumps(json.loads(body)).encode() + b";\n"
        origin.routes["/base/" + f.path.replace(" ", "%20")] = body
    argv = ["fetch", bench, "--suites-dir", str(SUITES), "--data-dir", str(tmp_path), "--origin", origin.url]
    assert main(argv) == (1 if manual else 0)
    err = capsys.readouterr().err
    for f in manual:
        assert f"{bench}/{f.name}:" in err and "it is not fetched automatically" in err
    for f in auto:
        assert sha((tmp_path / suite.data_folder / f.name).read_bytes()) == f.sha256
    assert len(origin.requests) == len(auto)  # manual files are never requested
    for f in manual:  # put in place by hand, as the message says
        target = tmp_path / suite.data_folder / f.name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes((source / f.name).read_bytes())
    assert main(argv) == 0
    assert len(origin.requests) == len(auto)  # the re-run downloaded nothing


def test_published_outputs_and_hub_data_are_not_fetched() -> None:
    """AthenaBench's runs-mini/ (model outputs, no checksums) is not benchmark input; RedSage's data
    is on the Hugging Face hub only, so it has no [fetch] table and its ledger says why."""
    assert not any(
        f.path.startswith("runs-mini/") for f in fetch_plan(load_suite(SUITES / "athenabench" / "suite.toml")).files
    )
    redsage = load_suite(SUITES / "redsage" / "suite.toml")
    with pytest.raises(FetchError, match=r"redsage has no \[fetch\] table"):
        fetch_plan(redsage)
    quirks = redsage.own_tables["ledger"]["quirks"]
    assert any("Hugging Face hub" in q and "[fetch]" in q for q in quirks)


def test_own_suites_have_ledger_quirks() -> None:
    for bench in (*OWN_SUITES, "redsage"):
        quirks = load_suite(SUITES / bench / "suite.toml").own_tables["ledger"]["quirks"]
        assert quirks and all(isinstance(q, str) and q.strip() for q in quirks), bench


def test_own_suites_pin_a_commit() -> None:
    for bench in OWN_SUITES:
        with (SUITES / bench / "suite.toml").open("rb") as fh:
            base = tomllib.load(fh)["fetch"]["base_url"]
        assert re.search(r"/[0-9a-f]{40}/$", base), base
