"""The plugin installs like one: the suites ship as package data, ``pytest suites/NAME`` runs the
packaged copy from a directory that has none (the header naming it and the version), ``benchaudit
init`` writes a local copy to edit, and ``benchaudit fetch`` works from anywhere.

The wheel itself (built, installed into a fresh virtualenv, run from an empty directory) is
checked by ``.ci/wheel-smoke``; these tests run the same resolution through the installed package.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import threading
import tomllib
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from helpers import SUITES
from pytest_benchaudit import __version__
from pytest_benchaudit.cli import main as benchaudit
from pytest_benchaudit.dataset.shipped import packaged_suites_dir
from pytest_benchaudit.pytest_plugin.paths import SuitePathError, resolve_suite_args
from pytest_benchaudit.testing.runs import only_run_dir, read_run
from pytest_benchaudit.testing.scripted_server import ScriptedServer

PACKAGED = f"the suites packaged with pytest-benchaudit {__version__}"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# Resolved at import, from the directory pytest started in (pytester changes it later).
_DATA = Path(os.environ.get("BENCHAUDIT_DATA") or "nowhere").expanduser().resolve()


@pytest.fixture
def cybermetric() -> Path:
    """The real CyberMetric folder, absolute, or a skip saying why there is none."""
    folder = _DATA / "cybermetric"
    if not (folder / "CyberMetric-80-v1.json").is_file():
        pytest.skip(
            f"real benchmark data not available: no {folder / 'CyberMetric-80-v1.json'} "
            "(set BENCHAUDIT_DATA to the datasets directory; make test does)"
        )
    return folder


def _first_golds(cybermetric: Path, n: int) -> list[str]:
    """The gold letters of CyberMetric-80's first ``n`` questions, read from the benchmark's file."""
    questions = json.loads((cybermetric / "CyberMetric-80-v1.json").read_text(encoding="utf-8"))
    return [q["solution"] for q in questions["questions"][:n]]


def _run_cm80(pytester: pytest.Pytester, server: ScriptedServer, cybermetric: Path) -> pytest.RunResult:
    """The README's command from ``pytester.path``: two CyberMetric-80 questions."""
    return pytester.runpytest(
        "suites/cybermetric",
        "-k",
        "cm80",
        "--limit",
        "2",
        "--model",
        f"m@{server.url}",
        f"--data-dir={cybermetric.parent}",
        "--report-dir",
        "out",
        "-p",
        "no:randomly",
    )


# ----------------------------------------------------------------------------- the packaged suites


def test_the_package_ships_every_suite_config_and_no_data() -> None:
    shipped = packaged_suites_dir()
    assert shipped is not None
    files = sorted(p.relative_to(shipped).as_posix() for p in shipped.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(SUITES).as_posix() for p in SUITES.rglob("*") if p.is_file())
    assert files and all(name.endswith(".toml") for name in files)  # configs only: data never ships
    declared = tomllib.loads((SUITES.parent / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert {"suites/*.toml", "suites/*/suite.toml"} <= set(declared["pytest_benchaudit"])


def test_a_suites_path_with_no_local_folder_resolves_to_the_packaged_copy(tmp_path: Path) -> None:
    shipped = packaged_suites_dir()
    assert shipped is not None
    args, notes = resolve_suite_args(["suites/cybermetric", "-k", "cm80", "suites/SecEval/suite.toml::mcq"], tmp_path)
    assert args == [str(shipped / "cybermetric"), "-k", "cm80", str(shipped / "seceval" / "suite.toml") + "::mcq"]
    assert len(notes) == 2 and all(PACKAGED in note for note in notes)
    assert notes[0].startswith(f"suites/cybermetric → {shipped / 'cybermetric'}: ")
    # a local suites/ folder without that suite: the packaged one still runs
    (tmp_path / "suites" / "mine").mkdir(parents=True)
    (tmp_path / "suites" / "mine" / "suite.toml").write_text("")
    assert resolve_suite_args(["suites/cybermetric"], tmp_path)[0] == [str(shipped / "cybermetric")]
    # a name neither has is still one error listing the local suites
    with pytest.raises(SuitePathError, match=r"no suite 'cybermetrc' in suites/.*suites there: mine"):
        resolve_suite_args(["suites/cybermetrc"], tmp_path)


def test_a_local_copy_wins_and_the_header_says_so(tmp_path: Path) -> None:
    local = tmp_path / "suites" / "cybermetric"
    local.mkdir(parents=True)
    (local / "suite.toml").write_bytes((SUITES / "cybermetric" / "suite.toml").read_bytes())
    args, notes = resolve_suite_args(["suites/cybermetric"], tmp_path)
    assert args == ["suites/cybermetric"]
    assert notes == [
        f"suites/cybermetric: the local copy ({local}), not the one packaged with pytest-benchaudit {__version__}"
    ]
    # the checkout's own suites/ is the packaged copy: nothing to say
    assert resolve_suite_args(["suites/cybermetric"], SUITES.parent) == (["suites/cybermetric"], [])


def test_pytest_runs_the_packaged_suite_from_an_empty_directory(
    pytester: pytest.Pytester, scripted: ScriptedServer, cybermetric: Path
) -> None:
    assert not any(pytester.path.iterdir())  # an empty directory: no suites/, no pyproject.toml
    result = _run_cm80(pytester, scripted, cybermetric)
    shipped = packaged_suites_dir()
    assert shipped is not None
    result.stdout.fnmatch_lines(
        [
            f"benchaudit: suites/cybermetric → {shipped / 'cybermetric'}: {PACKAGED} "
            "(no local suites/cybermetric; `benchaudit init` writes a copy to edit)"
        ]
    )
    run = read_run(only_run_dir(pytester.path / "out"))
    records = run["records"]
    assert [(r["benchmark"], r["task"], r["question_index"]) for r in records] == [
        ("cybermetric", "cm80", 0),
        ("cybermetric", "cm80", 1),
    ]
    assert [r["gold"] for r in records] == _first_golds(cybermetric, 2)  # the benchmark's own file, read here
    assert sum(call.path.endswith('/chat/completions') for call in scripted.calls) == 2
    # run.json's checksum is the packaged file's, by hashlib here
    checksums = run["run"]["suite_checksums"]
    assert checksums[str(shipped / "cybermetric" / "suite.toml")] == _sha256(shipped / "cybermetric" / "suite.toml")


@pytest.mark.parametrize(
    "target", ["suites/cybermetric/suite.toml", "suites/cybermetric/suite.toml::cm80"], ids=["file", "node-id"]
)
def test_a_packaged_suite_named_by_file_or_node_id_writes_its_run_directory(
    pytester: pytest.Pytester, scripted: ScriptedServer, cybermetric: Path, target: str
) -> None:
    """With `--data-dir DIR` as two words, pytest takes DIR for its rootdir (the suites/ path does not
    exist when it decides), and pytest 9.2 then drops the suite file from the node ids of items outside
    it.  Before, the controller looked for the file in the node id: every question was asked and no run
    directory written.  Now a benchmark report is known by the suite file among its keywords too."""
    result = pytester.runpytest(
        target,
        "-k",
        "cm80",
        "--limit",
        "2",
        "--model",
        f"m@{scripted.url}",
        "--data-dir",
        str(cybermetric.parent),
        "--report-dir",
        "out",
        "-p",
        "no:randomly",
    )
    assert sum(call.path.endswith("/chat/completions") for call in scripted.calls) == 2
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), result.stdout.str()[-2000:]
    records = read_run(only_run_dir(pytester.path / "out"))["records"]
    assert [(r["benchmark"], r["task"], r["question_index"]) for r in records] == [
        ("cybermetric", "cm80", 0),
        ("cybermetric", "cm80", 1),
    ]
    assert "run directory: out/" in result.stdout.str()


# ----------------------------------------------------------------------------- benchaudit init


def test_init_copies_the_suites_byte_for_byte_and_writes_a_pyproject(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "proj"
    assert benchaudit(["init", str(project)]) == 0
    shipped = packaged_suites_dir()
    assert shipped is not None
    copied = sorted(p.relative_to(project / "suites") for p in (project / "suites").rglob("*.toml"))
    assert copied == sorted(p.relative_to(shipped) for p in shipped.rglob("*.toml"))
    assert all(_sha256(project / "suites" / rel) == _sha256(shipped / rel) for rel in copied)
    pyproject = tomllib.loads((project / "pyproject.toml").read_text())
    assert pyproject["tool"]["pytest"]["ini_options"]["testpaths"] == ["suites"]
    assert set(pyproject["tool"]["benchaudit"]["models"]["my-model"]) == {"endpoint", "model", "api_key_env"}
    out = capsys.readouterr().out
    assert f"{len(copied)} file(s) written, 0 already the same" in out and __version__ in out
    # again: nothing to write, the pyproject (now there) left alone and its snippet printed
    before = (project / "pyproject.toml").read_bytes()
    assert benchaudit(["init", str(project)]) == 0
    out = capsys.readouterr().out
    assert f"0 file(s) written, {len(copied)} already the same" in out and "[tool.benchaudit.models.my-model]" in out
    assert (project / "pyproject.toml").read_bytes() == before


def test_init_keeps_an_edited_suite_unless_forced(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert benchaudit(["init", str(tmp_path), "--suite", "cybermetric"]) == 0
    assert sorted(p.name for p in (tmp_path / "suites").iterdir()) == ["cybermetric", "standardized.toml"]
    edited = tmp_path / "suites" / "cybermetric" / "suite.toml"
    edited.write_text(edited.read_text() + "\n# my edit\n")
    capsys.readouterr()
    assert benchaudit(["init", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"{edited}: differ from the packaged copies" in err and "--force" in err and "Traceback" not in err
    assert edited.read_text().endswith("# my edit\n")
    assert not (tmp_path / "suites" / "seceval").exists()  # refused: nothing else written either
    assert benchaudit(["init", str(tmp_path), "--force"]) == 0
    assert _sha256(edited) == _sha256(SUITES / "cybermetric" / "suite.toml")
    assert benchaudit(["init", str(tmp_path), "--suite", "cybermetrc"]) == 2
    assert "no suite 'cybermetrc'" in capsys.readouterr().err


def test_a_project_from_init_runs_its_local_copy(
    pytester: pytest.Pytester, scripted: ScriptedServer, cybermetric: Path
) -> None:
    assert benchaudit(["init", str(pytester.path), "--suite", "cybermetric"]) == 0
    local = pytester.path / "suites" / "cybermetric" / "suite.toml"
    # an edit to the local copy is what runs: ask for at most 7 tokens
    text = local.read_text()
    assert text.count("\n[layers.standardized]\n") == 1
    local.write_text(text.replace("\n[layers.standardized]\n", "\n[layers.standardized]\ninference.max_tokens = 7\n"))
    result = _run_cm80(pytester, scripted, cybermetric)
    result.stdout.fnmatch_lines(
        [
            f"benchaudit: suites/cybermetric: the local copy ({local.parent}), not the one "
            f"packaged with pytest-benchaudit {__version__}",
            "configfile: pyproject.toml",
        ]
    )
    run = read_run(only_run_dir(pytester.path / "out"))
    assert len(run["records"]) == 2
    asked = [call for call in scripted.calls if call.path.endswith("/chat/completions")]
    assert [call.body.get("max_tokens") for call in asked] == [7, 7]


# ----------------------------------------------------------------------------- benchaudit fetch


def test_fetch_works_from_a_directory_without_suites(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cybermetric: Path
) -> None:
    # the benchmark's files served over HTTP on 127.0.0.1 as the origin (sha256s: the packaged suite's)
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(cybermetric))
    with ThreadingHTTPServer(("127.0.0.1", 0), handler) as origin:
        threading.Thread(target=origin.serve_forever, daemon=True).start()
        monkeypatch.chdir(tmp_path)  # no suites/ here: the packaged cybermetric suite names the files
        try:
            rc = benchaudit(
                [
                    "fetch",
                    "cybermetric",
                    "--data-dir",
                    "data",
                    "--origin",
                    f"http://127.0.0.1:{origin.server_address[1]}/",
                ]
            )
        finally:
            origin.shutdown()
    assert rc == 0
    fetched = sorted(p.name for p in (tmp_path / "data" / "cybermetric").iterdir())
    assert fetched == ["CyberMetric-2000-v1.json", "CyberMetric-500-v1.json", "CyberMetric-80-v1.json"]
    assert all(_sha256(tmp_path / "data" / "cybermetric" / name) == _sha256(cybermetric / name) for name in fetched)
