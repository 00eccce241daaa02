"""Drift: the installed peer harnesses against the fixtures the peer layers reproduce.

The peer layers (``inspect_evals``, ``lm_eval``, ...) are checked against bodies and scores captured
from one release of each harness (tests/fixtures/peers/, the release in each layer's card under
``reproduces``).  These tests run the harness that is installed, through the same capture scripts
that made the fixtures, on a few questions against the project's scripted server, and compare what
it sent and how it scored with the fixtures field by field.  A newer release that changes a request
(a body field, a message, the prompt text) or a reader (a score, a log-likelihood, a filtered reply)
fails here, naming the field, both values and both releases; one that changes nothing passes, and
the layer then reproduces it too.

They run where the peers are installed: ``$BENCHAUDIT_PEER_PYTHON`` names the Python of a virtualenv
holding them (``make peers-venv``, outside the checkout; ``make test-peers`` runs these with it), and
are skipped with the reason otherwise.  How Inspect *reads* a reply is checked live in
tests/scoring/test_peer_inspect_rule.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers import REPO, SUITES
from pytest_benchaudit.cli.app import main
from pytest_benchaudit.testing.peer_python import find_peer_python, peer_versions

PEERS = REPO / "tests" / "fixtures" / "peers"
INSPECT = PEERS / "inspect_evals-0.26.0"
LM_EVAL = PEERS / "lm_eval-0.4.13"
LIMIT = 4  # questions each live run asks: enough to see every field, quick enough to run often


def _peer(*modules: str) -> str:
    python, why = find_peer_python(*modules)
    if python is None:
        pytest.skip(why)
    return python


def _reproduces(bench: str, layer: str) -> dict[str, str]:
    from pytest_benchaudit.dataset.suites import load_suite

    suite = load_suite(SUITES / bench / "suite.toml")
    return dict(suite.pipeline(next(iter(suite.tasks)), layer).reproduces)


def field_diffs(where: str, installed: Any, fixture: Any) -> list[str]:
    """Each leaf where ``installed`` and ``fixture`` differ, as ``where.key: fixture X, installed Y``."""
    if isinstance(installed, dict) and isinstance(fixture, dict):
        return [
            d
            for key in sorted(set(installed) | set(fixture), key=str)
            for d in field_diffs(f"{where}.{key}", installed.get(key, "<absent>"), fixture.get(key, "<absent>"))
        ]
    if isinstance(installed, list) and isinstance(fixture, list) and len(installed) == len(fixture):
        return [d for i, (a, b) in enumerate(zip(installed, fixture)) for d in field_diffs(f"{where}[{i}]", a, b)]
    return [] if installed == fixture else [f"{where}: fixture {fixture!r}, installed {installed!r}"]


def text_diff(where: str, installed: str, fixture: str) -> list[str]:
    """Where two texts first differ, with a little of each around it."""
    if installed == fixture:
        return []
    at = next((i for i, (a, b) in enumerate(zip(installed, fixture)) if a != b), min(len(installed), len(fixture)))
    return [
        f"{where} differs at character {at}: fixture {fixture[max(0, at - 30) : at + 30]!r}, installed "
        f"{installed[max(0, at - 30) : at + 30]!r}"
    ]


def _verdict(diffs: list[str], installed: dict[str, str], reproduced: dict[str, str]) -> None:
    assert not diffs, (
        f"the installed peer ({installed}) no longer does what the layer reproduces ({reproduced}): "
        + "; ".join(diffs[:12])
        + (f"; ... {len(diffs) - 12} more" if len(diffs) > 12 else "")
    )


# ------------------------------------------------------------------------------------------------ inspect


def _rows(path: Path) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in map(json.loads, path.read_text(encoding="utf-8").splitlines())}


@pytest.mark.parametrize(
    ("task", "bench"), [("cm80", "cybermetric"), ("mmlu_0shot", "mmlu_cs"), ("mmlu_5shot", "mmlu_cs")]
)
def test_the_installed_inspect_evals_sends_what_the_layer_reproduces(
    tmp_path: Path, real_data: Path, task: str, bench: str
) -> None:
    python = _peer("inspect_ai", "inspect_evals", "openai")
    done = subprocess.run(
        [
            python,
            str(INSPECT / "capture.py"),
            "--data",
            str(real_data),
            "--tasks",
            task,
            "--limit",
            str(LIMIT),
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=REPO,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    live, stored = _rows(tmp_path / f"{task}.jsonl"), _rows(INSPECT / f"{task}.jsonl")
    assert len(live) == LIMIT
    diffs = []
    for qid, row in live.items():
        want = stored[qid]
        diffs += field_diffs(f"{task} question {qid} body", row["fields"], want["fields"])
        if [m["role"] for m in row["messages"]] != [m["role"] for m in want["messages"]]:
            diffs.append(
                f"{task} question {qid}: message roles: fixture {[m['role'] for m in want['messages']]}, "
                f"installed {[m['role'] for m in row['messages']]}"
            )
            continue
        diffs += [
            f"{task} question {qid}: messages[{i}] ({m['role']}) content differs: fixture {w['length']} "
            f"characters, installed {m['length']} (see the skeleton)"
            for i, (m, w) in enumerate(zip(row["messages"], want["messages"]))
            if m["sha256"] != w["sha256"]
        ]
    # The harness's own text (benchmark text replaced by placeholders) says where the content differs.
    live_skel = json.loads((tmp_path / f"{task}.skeleton.json").read_text(encoding="utf-8"))["body"]
    stored_skel = json.loads((INSPECT / f"{task}.skeleton.json").read_text(encoding="utf-8"))["body"]
    for i, (a, b) in enumerate(zip(live_skel["messages"], stored_skel["messages"])):
        diffs += text_diff(f"{task} skeleton messages[{i}] ({a['role']})", a["content"], b["content"])
    _verdict(diffs, peer_versions(python, "inspect_evals", "inspect_ai", "openai"), _reproduces(bench, "inspect_evals"))


# ------------------------------------------------------------------------------------------------ lm-eval


def _requests_by_doc(capture: dict[str, Any], docs: set[str]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for r in capture["requests"]:
        if str(r["doc_id"]) in docs:
            out.setdefault(str(r["doc_id"]), []).append(
                {
                    "continuation": r["continuation"],
                    "prompt_sha256": r["prompt_sha256"],
                    "prompt_length": r["prompt_length"],
                    "prompt_type": r["prompt_type"],
                    "fields": r["fields"],
                }
            )
    return {k: sorted(v, key=lambda e: json.dumps(e, sort_keys=True)) for k, v in out.items()}


@pytest.mark.parametrize(
    "case",
    [
        "loglikelihood_0shot",
        "loglikelihood_5shot",
        "generative",
        "generative_eos",
        "generative_eos_concurrent",
        "loglikelihood_merge",
        "loglikelihood_no_generated",
    ],
)
def test_the_installed_lm_eval_sends_and_scores_what_the_layer_reproduces(
    tmp_path: Path, real_data: Path, case: str
) -> None:
    python = _peer("lm_eval")
    venv = Path(python).parent.parent
    done = subprocess.run(
        [
            sys.executable,
            str(LM_EVAL / "recapture.py"),
            "--venv",
            str(venv),
            "--cases",
            case,
            "--limit",
            str(LIMIT),
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=REPO,
        env={**os.environ, "BENCHAUDIT_DATA": str(real_data)},
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    live = json.loads((tmp_path / f"{case}.json").read_text(encoding="utf-8"))
    stored = json.loads((LM_EVAL / f"{case}.json").read_text(encoding="utf-8"))
    docs = set(live["per_question"])
    assert len(docs) == LIMIT
    diffs = field_diffs(f"{case} requests", _requests_by_doc(live, docs), _requests_by_doc(stored, docs))
    diffs += field_diffs(
        f"{case} scores", {d: live["per_question"][d] for d in docs}, {d: stored["per_question"][d] for d in docs}
    )
    diffs += field_diffs(f"{case} endpoint", live["endpoint"], stored["endpoint"])
    diffs += text_diff(f"{case} prompt skeleton", live["skeleton"], stored["skeleton"])
    _verdict(diffs, peer_versions(python, "lm_eval"), _reproduces("mmlu_cs", "lm_eval"))


# ------------------------------------------------------------------------------------------------ cards


@pytest.mark.parametrize(
    ("bench", "layer", "fixtures"),
    [
        ("cybermetric", "inspect_evals", INSPECT),
        ("mmlu_cs", "inspect_evals", INSPECT),
        ("mmlu_cs", "inspect_evals_5shot", INSPECT),
        ("mmlu_cs", "lm_eval", LM_EVAL),
        ("mmlu_cs", "lm_eval_5shot", LM_EVAL),
        ("mmlu_cs", "lm_eval_generative", LM_EVAL),
    ],
)
def test_each_peer_layer_names_the_release_its_fixtures_come_from(
    capsys: pytest.CaptureFixture[str], bench: str, layer: str, fixtures: Path
) -> None:
    assert main(["card", bench, "--pipeline", layer, "--suites-dir", str(SUITES)]) == 0
    for card in json.loads(capsys.readouterr().out).values():
        reproduces = card["reproduces"]
        # The fixture folder is named after the harness release; its recorded files say the same.
        harness, version = fixtures.name.rsplit("-", 1)
        assert reproduces[harness] == version, reproduces
        recorded = [
            json.loads(p.read_text(encoding="utf-8"))
            for p in sorted(fixtures.glob("*.json"))
            if not p.name.endswith(".skeleton.json")
        ]
        for doc in recorded:
            for package in ("inspect_ai", "openai", "lm_eval_version"):
                if package in doc:
                    assert reproduces[package.removesuffix("_version")] == doc[package], (package, reproduces)
        readme = (fixtures / "README.md").read_text(encoding="utf-8")
        assert all(
            f"{package.replace('_', '-')} {v}" in readme or f"{package} {v}" in readme
            for package, v in reproduces.items()
        ), reproduces
