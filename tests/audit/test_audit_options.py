"""``build_audit``'s options object (issue 34): frozen, defaults that are the command's, every flag
reaching its field."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import pytest

from pytest_benchaudit import compare
from pytest_benchaudit.audit import whole
from pytest_benchaudit.audit.whole import AuditOptions
from pytest_benchaudit.cli import audit_cmd
from pytest_benchaudit.cli.audit_cmd import add_parser, run
from pytest_benchaudit.compare import CompareError
from pytest_benchaudit.diagnose.flips import OrderFlip

# The multiverse's pairs (issue 36) the command computes from the runs before build_audit: stood in
# for here (nothing is read), so that what reaches the options is known.
FLIPS: list[OrderFlip] = []


def _options_of(monkeypatch: pytest.MonkeyPatch, *argv: str) -> AuditOptions:
    """The options ``benchaudit audit ARGV`` hands build_audit (which stops there: nothing is read)."""
    seen: list[AuditOptions] = []

    def stop(run_paths: list[Path], out: Path, options: AuditOptions = AuditOptions()) -> None:  # noqa: B008 - the default under test
        seen.append(options)
        raise CompareError("stopped before reading any run")

    monkeypatch.setattr(whole, "build_audit", stop)
    monkeypatch.setattr(compare, "expand_runs", lambda paths: list(paths))  # RUN is judged first: stood in too
    monkeypatch.setattr(audit_cmd, "_multiverse", lambda args: {"stood in": args.runs})
    monkeypatch.setattr(audit_cmd, "_flips", lambda doc: FLIPS if doc == {"stood in": [Path("RUN")]} else None)
    parser = argparse.ArgumentParser(prog="benchaudit")
    add_parser(parser.add_subparsers(dest="command", required=True))
    assert run(parser.parse_args(["audit", "RUN", "--out", "OUT", *argv])) == 2
    (options,) = seen
    return options


def test_the_commands_defaults_are_the_options_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    """Besides the multiverse's pairs of the runs, which the command hands in unless --no-multiverse."""
    assert _options_of(monkeypatch) == AuditOptions(order_flips=FLIPS)
    assert _options_of(monkeypatch, "--no-multiverse") == AuditOptions()


def test_each_flag_reaches_its_field_and_only_it(monkeypatch: pytest.MonkeyPatch) -> None:
    got = _options_of(
        monkeypatch,
        "--toward",
        "released",
        "--from",
        "lm_eval",
        "--pipelines",
        "lm_eval, released",
        "--regenerated",
        "R1",
        "R2",
        "--suites-dir",
        "s",
        "--data-dir",
        "d",
        "--resamples",
        "7",
        "--seed",
        "3",
    )
    want = AuditOptions(
        toward="released",
        from_layer="lm_eval",
        pipelines=["lm_eval", "released"],
        regenerated=[Path("R1"), Path("R2")],
        suites_dir=Path("s"),
        data_dir="d",
        n_resamples=7,
        seed=3,
        order_flips=FLIPS,
    )
    assert got == want
    changed = {
        f.name for f in dataclasses.fields(AuditOptions) if getattr(got, f.name) != getattr(AuditOptions(), f.name)
    }
    assert changed == {
        "toward",
        "from_layer",
        "pipelines",
        "regenerated",
        "suites_dir",
        "data_dir",
        "n_resamples",
        "seed",
        "order_flips",
    }


def test_the_options_are_frozen_and_build_audit_takes_them_whole() -> None:
    options = AuditOptions(toward="released")
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.toward = "standardized"  # type: ignore[misc]
    assert dataclasses.replace(options, seed=1) == AuditOptions(toward="released", seed=1)
    with pytest.raises(TypeError):
        whole.build_audit([], Path("out"), toward="released")  # type: ignore[call-arg]
