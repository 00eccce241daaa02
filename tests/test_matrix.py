"""Issue 12's matrix: every ``benchaudit`` command on every kind of run, and every pytest option with a bad value.

Each cell asserts the exit status (0 ok, 1 a failing gate / an unusable run, 2 a usage error of the
command line, 4 a pytest usage error) and that neither a traceback nor an INTERNALERROR is printed.
The runs are made once per module by real pytest processes against the scripted server (and, where
the data is there, a real CTI-Bench import), then copied for each cell.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO
from pytest_benchaudit.cli.app import main
from pytest_benchaudit.testing.runs import only_run_dir, write_run_dir
from pytest_benchaudit.testing.scripted_server import Reply, ScriptedServer
from pytest_benchaudit.testing.toy import toy_script, write_toy

DOCUMENTED = """
[tasks.mcq.documented]
prompt.template = "plain"
prompt.format = { mode = "chat", system_role = "none", few_shot = 0 }
inference.max_tokens = 64
scoring = { metric = "exact_match" }
"""

KINDS = ("pytest", "imported", "rescored", "variants", "layers", "judged", "empty", "corrupt")


def _pytest(root: Path, *args: str) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "suites/toy",
            "--data-dir",
            "data",
            "--max-retries",
            "0",
            "--no-cache",
            *args,
        ],
        cwd=root,
        capture_output=True,
        text=True,
    )
    assert proc.returncode in (0, 1), proc.stdout[-2000:] + proc.stderr[-2000:]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One run directory of each kind (the imported one only where the CTI-Bench data is there)."""
    root = tmp_path_factory.mktemp("matrix")
    write_toy(root)
    with (root / "suites" / "toy" / "suite.toml").open("a") as fh:
        fh.write(DOCUMENTED)
    out: dict[str, Path] = {}
    with ScriptedServer(toy_script()) as model, ScriptedServer(lambda call: Reply(content='{"answer": "A"}')) as judge:
        for kind, args in (
            ("pytest", ["--model", f"n@{model.url}"]),  # two models: compare and audit-gold rank them
            ("variants", ["--vary", "scoring.denominator=valid,total"]),
            ("layers", ["--pipelines", "released,standardized"]),  # both layers in one run
            ("judged", ["--judge", f"j@{judge.url}", "--set", "extraction.rule=judge", "-k", "mcq"]),
        ):
            _pytest(root, "--model", f"m@{model.url}", "--report-dir", kind, *args)
            out[kind] = only_run_dir(root / kind)
    assert (
        main(
            [
                "rescore",
                str(out["pytest"]),
                "--set",
                "scoring.denominator=valid",
                "--report-dir",
                str(root / "rescored"),
                "--suites-dir",
                str(root / "suites"),
            ]
        )
        == 0
    )
    out["rescored"] = only_run_dir(root / "rescored")
    out["empty"] = write_run_dir(root, "empty", [])
    (out["empty"] / "summary.json").write_text(json.dumps({"results": [], "benchmarks": [], "gates": []}))
    corrupt = root / "corrupt"
    shutil.copytree(out["pytest"], corrupt)
    with (corrupt / "records.jsonl").open("a") as fh:
        fh.write('[1,2,3]\n{"benchmark": "toy"}\n')
    out["corrupt"] = corrupt
    import os

    data = os.environ.get("BENCHAUDIT_DATA")
    responses = Path(data or "/nonexistent") / "cti-bench" / "responses"
    if responses.is_dir():
        assert (
            main(
                [
                    "import",
                    "cti-bench-responses",
                    str(responses),
                    "--report-dir",
                    str(root / "imported"),
                    "--suites-dir",
                    str(REPO / "suites"),
                    "--data-dir",
                    data or "",
                ]
            )
            == 0
        )
        out["imported"] = sorted((root / "imported").iterdir())[0]
    return out


@pytest.fixture
def run_of(runs: dict[str, Path], tmp_path: Path):  # type: ignore[no-untyped-def]
    def get(kind: str) -> Path:
        if kind not in runs:
            pytest.skip("no CTI-Bench responses in $BENCHAUDIT_DATA: the imported run cannot be made here")
        copy = tmp_path / "runs" / runs[kind].name
        shutil.copytree(runs[kind], copy)
        return copy

    return get


def _argv(command: str, run: Path, tmp_path: Path, suites: Path) -> list[str]:
    return {
        "show": ["show", run],
        "summarize": ["summarize", run],
        "card": ["card", run],
        "rescore": [
            "rescore",
            run,
            "--set",
            "scoring.denominator=total",
            "--suites-dir",
            suites,
            "--report-dir",
            tmp_path / "re",
        ],
        "sweep": ["sweep", run, "--vary", "extraction.reasoning=keep,strip", "--suites-dir", suites],
        "compare": ["compare", run, "--out", tmp_path / "cmp"],
        "export": ["export", run, "--out", tmp_path / "exp", "--samples"],
        "audit-gold": ["audit-gold", run, "--out", tmp_path / "gold.csv"],
        "judge-agreement": ["judge-agreement", run],
    }[command]


# The expected exit status of each command on each kind of run.  1: the run cannot be used as it is
# (empty, or a line that is not a record: the message names file:line and the field); 2: a usage
# error of the command line (judge-agreement on a run without judge verdicts).
EXPECTED: dict[str, dict[str, int]] = {
    "show": {"empty": 1, "corrupt": 1},  # a run the reading commands refuse is not shown either (issue 33)
    "summarize": {"empty": 1, "corrupt": 1},
    "card": {},
    "rescore": {"empty": 1, "corrupt": 1},
    "sweep": {"empty": 1, "corrupt": 1},
    "compare": {"empty": 1, "corrupt": 1},
    "export": {"empty": 1, "corrupt": 1},
    # a consensus needs two models: a one-model run is a usage error saying so
    "audit-gold": {"imported": 2, "variants": 2, "layers": 2, "judged": 2, "empty": 1, "corrupt": 1},
    "judge-agreement": {
        "pytest": 2,
        "imported": 2,
        "rescored": 2,
        "variants": 2,
        "layers": 2,
        "empty": 1,
        "corrupt": 1,
    },
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("command", sorted(EXPECTED))
def test_every_command_on_every_kind_of_run(
    command: str, kind: str, run_of, tmp_path: Path, runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    run = run_of(kind)
    suites = REPO / "suites" if kind == "imported" else runs["pytest"].parent.parent / "suites"
    rc = main([str(a) for a in _argv(command, run, tmp_path, suites)])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err and "INTERNALERROR" not in out + err
    assert rc == EXPECTED[command].get(kind, 0), err
    if rc:
        assert len(err.strip().splitlines()) == 1 and err.startswith(f"benchaudit {command}: "), err


@pytest.mark.parametrize("layer", ["standardized", "released", "documented", "relesed"])
@pytest.mark.parametrize("kind", ["pytest", "imported", "layers"])
@pytest.mark.parametrize("command", ["rescore", "sweep"])
def test_offline_commands_under_each_layer(
    command: str,
    kind: str,
    layer: str,
    run_of,
    tmp_path: Path,
    runs: dict[str, Path],
    capsys: pytest.CaptureFixture[str],
) -> None:
    run = run_of(kind)
    suites = REPO / "suites" if kind == "imported" else runs["pytest"].parent.parent / "suites"
    argv = (
        ["rescore", run, "--pipeline", layer, "--report-dir", tmp_path / "re"]
        if command == "rescore"
        else ["sweep", run, "--toward", layer]
    )
    rc = main([str(a) for a in [*argv, "--suites-dir", suites]])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    if layer == "relesed":
        assert rc == 2 and "(did you mean 'released'?)" in err
    elif layer == "documented" and command == "rescore":
        # the documented layers leave fields unspecified: skipped with the fields named (all of them: an error)
        assert rc in (0, 2) and "unspecified" in out + err
    else:
        assert rc == 0, err


def test_commands_without_a_run_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The rest of the commands with bad input: one line, exit 2, never a traceback."""
    cases = [
        (["card", "nosuch", "--suites-dir", str(REPO / "suites")], 2),
        (["card", "seceval", "--pipeline", "relesed", "--suites-dir", str(REPO / "suites")], 2),
        (["card", "seceval", "--set", "inference.max_tokens=-3", "--suites-dir", str(REPO / "suites")], 2),
        (["ledger", "--suites-dir", str(tmp_path / "none")], 2),
        (["fetch", "nosuch", "--suites-dir", str(REPO / "suites")], 2),
        (["import", "cti-bench-responses", str(tmp_path / "none"), "--report-dir", str(tmp_path / "r")], 2),
        (["show", str(tmp_path / "none")], 2),
        (["rescore", str(tmp_path)], 2),
    ]
    for argv, expected in cases:
        rc = main(argv)
        out, err = capsys.readouterr()
        assert "Traceback" not in out + err, argv
        assert rc == expected, (argv, err)


# --------------------------------------------------------------------------- pytest options with bad values


BAD_OPTIONS = [
    ["--model", "nonsense@"],
    ["--model", "replay:/nonexistent/run"],
    ["--model", "vllm:"],
    ["--pipeline", "relesed"],
    ["--pipelines", "released,relesed"],
    ["--pipelines", "released"],
    ["--pipelines", "released,standardized", "--pipeline", "released"],
    ["--set", "inference.max_tokenz=5"],
    ["--set", "inference.max_tokens=-1"],
    ["--set", "scoring.denominator=some"],
    ["--set", "prompt.template=nope"],
    ["--set", "nofield"],
    ["--limit", "0"],
    ["--limit", "abc"],
    ["--concurrency", "0"],
    ["--gate", "toy=>1"],
    ["--gate", "toi>=0.5"],
    ["--gate", "toy>=50"],
    ["--vary", "inference.max_tokens"],
    ["--vary", "extraction.rule=psychic"],
    ["--judge", "nonsense@"],
    ["--resume", "/nonexistent/run"],
    ["--max-retries", "-1"],
    ["--request-timeout", "0"],
    ["--request-timeout", "nan"],
    ["--cache-expiry", "soon"],
    ["--report-dir", "blocked"],
]


@pytest.mark.parametrize("args", BAD_OPTIONS, ids=lambda a: " ".join(a))
def test_every_pytest_option_with_a_bad_value_is_a_usage_error(pytester: pytest.Pytester, args: list[str]) -> None:
    write_toy(pytester.path)
    (pytester.path / "blocked").write_text("")
    with ScriptedServer(toy_script()) as server:
        result = pytester.runpytest("suites/toy", "--data-dir", "data", "--model", f"m@{server.url}", *args)
        asked = [c for c in server.calls if c.path.endswith("completions")]
    text = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in text and "INTERNALERROR" not in text, text[-2000:]
    assert result.ret == pytest.ExitCode.USAGE_ERROR, text[-2000:]
    assert not asked  # nothing was asked of the model
