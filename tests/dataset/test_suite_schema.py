"""The suite.toml schema: every bad suite gets one line naming file, table and key; good ones pass."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from pytest_benchaudit.cli.app import main
from pytest_benchaudit.dataset.suites import SuiteError, load_suite

REPO = Path(__file__).resolve().parents[2]
SUITES = REPO / "suites"


@pytest.fixture
def seceval(tmp_path: Path) -> Path:
    """A copy of the real SecEval suite (and the shared standardized file) to break."""
    shutil.copy(SUITES / "standardized.toml", tmp_path / "standardized.toml")
    shutil.copytree(SUITES / "seceval", tmp_path / "seceval")
    return tmp_path / "seceval" / "suite.toml"


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, old
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


BAD = [
    (
        'question = "question"',
        'qestion = "question"',
        r"\[tasks\.mcq\.data\]: unknown key 'qestion' \(did you mean 'question'\?\)",
    ),
    (
        "[tasks.mcq.released]\n",
        "[tasks.mcq.relased]\n",
        r"\[tasks\.mcq\]: unknown key or layer 'relased' \(did you mean 'released'\?\)",
    ),
    ('gold = "answer"\n', "", r"\[tasks\.mcq\.data\]: missing key 'gold'"),
    ("[ledger]", "[ledgr]", r"unknown key 'ledgr' \(did you mean 'ledger'\?\)"),
    ('title = "SecEval"', 'titel = "SecEval"', r"\[benchmark\]: unknown key 'titel' \(did you mean 'title'\?\)"),
    ('format = "json"\nid = "id"', 'format = "xml"\nid = "id"', r"\[tasks\.mcq\.data\] format"),
]


@pytest.mark.parametrize(
    ("old", "new", "message"), BAD, ids=["data-key", "layer", "gold", "top", "benchmark", "format"]
)
def test_bad_suite_is_one_error_naming_file_table_and_key(seceval: Path, old: str, new: str, message: str) -> None:
    _edit(seceval, old, new)
    with pytest.raises(SuiteError, match=message) as info:
        load_suite(seceval)
    assert str(seceval) in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    "command",
    [["validate", "{root}"], ["card", "seceval", "--suites-dir", "{root}"], ["ledger", "--suites-dir", "{root}"]],
)
def test_unknown_rule_fails_validate_card_and_ledger(
    seceval: Path, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    _edit(seceval, 'rule = "all_capital_letters"', 'rule = "all_capitol_letters"')
    assert main([part.format(root=seceval.parent.parent) for part in command]) == 2
    err = capsys.readouterr().err
    assert "[tasks.mcq.released] extraction.rule: 'all_capitol_letters' is not a known rule" in err
    assert "did you mean 'all_capital_letters'?" in err and "Traceback" not in err


def test_the_shipped_suites_validate(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(SUITES)]) == 0
    assert re.search(r"(\d+) of \1 suite\(s\) valid", capsys.readouterr().out)


def test_the_example_in_docs_validates(tmp_path: Path) -> None:
    text = (REPO / "docs" / "suites.md").read_text(encoding="utf-8")
    example = re.search(r"```toml\n(.*?)```", text, re.S)
    assert example
    shutil.copy(SUITES / "standardized.toml", tmp_path / "standardized.toml")
    (tmp_path / "toybench").mkdir()
    (tmp_path / "toybench" / "suite.toml").write_text(example.group(1), encoding="utf-8")
    assert main(["validate", str(tmp_path)]) == 0


def test_validate_on_a_folder_without_suites(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(tmp_path)]) == 2
    assert "no */suite.toml found" in capsys.readouterr().err


# Values that cannot be sent: JSON has no NaN or infinity (a NaN was written to run.json as NaN and
# sent as null), and each decoding field has its API's range; the error names the nearest valid value.
UNSENDABLE = [
    ("temperature = 0.7,", "temperature = nan,", "temperature must be a finite number, not nan"),
    ("temperature = 0.7,", "temperature = inf,", "temperature must be a finite number, not inf"),
    ("temperature = 0.7,", "temperature = -1.0,", "temperature must be >= 0, not -1; the nearest valid value is 0"),
    (
        'top_p = "unspecified", seed = "unspecified" }\ninference.max_tokens = "unspecified"',
        'top_p = 1.5, seed = "unspecified" }\ninference.max_tokens = "unspecified"',
        r"top_p must be in \(0, 1\], not 1.5; the nearest valid value is 1",
    ),
    (
        'top_p = "unspecified", seed = "unspecified" }\ninference.max_tokens = "unspecified"',
        'top_p = 0.0, seed = "unspecified" }\ninference.max_tokens = "unspecified"',
        r"top_p must be in \(0, 1\], not 0",
    ),
    (
        "inference.max_tokens = 5\n",
        "inference.max_tokens = 0\n",
        "max_tokens must be >= 1, not 0; the nearest valid value is 1",
    ),
]


@pytest.mark.parametrize(
    ("old", "new", "message"),
    UNSENDABLE,
    ids=["nan", "inf", "negative-temperature", "top_p-above-1", "top_p-0", "max_tokens-0"],
)
def test_a_value_that_cannot_be_sent_fails_validate_and_card(
    seceval: Path, old: str, new: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _edit(seceval, old, new)
    assert main(["validate", str(seceval.parent.parent)]) == 2
    said = capsys.readouterr()
    out = said.out + said.err
    assert re.search(message, out) and ("inference.decoding" in out or "inference.max_tokens" in out), out
    assert "Value error" not in out and "NaN" not in out
    layer = "released_base" if "max_tokens" in new else "released"
    assert main(["card", "seceval", "--pipeline", layer, "--suites-dir", str(seceval.parent.parent)]) == 2
    captured = capsys.readouterr()
    assert re.search(message, captured.err), captured.err
    assert "NaN" not in captured.out  # no card with a value JSON cannot hold was printed


@pytest.mark.parametrize(
    ("value", "message"), [("nan", "not nan"), ("-0.5", "nearest valid value is 0"), ("Infinity", "not inf")]
)
def test_set_refuses_a_value_that_cannot_be_sent(
    seceval: Path, value: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(
            [
                "card",
                "seceval",
                "--suites-dir",
                str(seceval.parent.parent),
                "--set",
                f"inference.decoding.temperature={value}",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "--set inference.decoding.temperature" in err and message in err, err


@pytest.mark.parametrize("value", ["nan", "-1.0"])
def test_a_run_with_an_unsendable_value_asks_nothing(pytester: pytest.Pytester, value: str) -> None:
    # Before: the run went ahead, wrote temperature NaN into run.json and sent "temperature": null.
    from pytest_benchaudit.testing.scripted_server import Reply, ScriptedServer
    from pytest_benchaudit.testing.toy import write_toy

    write_toy(pytester.path)
    _edit(pytester.path / "suites" / "toy" / "suite.toml", "temperature = 0.0", f"temperature = {value}")
    with ScriptedServer(lambda call: Reply(content="Answer: B")) as server:
        result = pytester.runpytest(
            "suites/toy",
            "--data-dir",
            "data",
            "--model",
            f"m@{server.url}",
            "--report-dir",
            "out",
            "--no-cache",
            "-p",
            "no:randomly",
        )
        asked = [c for c in server.calls if c.path.endswith("completions")]
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()  # a malformed suite: a collection error
    text = result.stdout.str() + result.stderr.str()
    assert "toy.mcq layer 'standardized': inference.decoding.temperature: temperature must be" in text
    assert "Traceback" not in text
    assert asked == [] and not list((pytester.path / "out").glob("*/run.json"))
