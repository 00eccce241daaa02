"""Mutation check of the pure core (``make mutants``): mutmut 3 over pipeline/, scoring/, aggregate/.

Each *group* below names the modules it mutates and the test files that cover them (the map from
module to tests lives here).  For a group the runner lays a copy of the checkout in
``build/mutation/<group>/`` (tracked and untracked files that git does not ignore), writes mutmut's
configuration there (``setup.cfg``: modules, test files, lines left alone) and runs ``mutmut run``
in it: mutmut makes one small change at a time (a comparison flipped, a constant off by one, ``and``
for ``or``, an argument dropped, a branch of a conditional forced, ...), forks a warmed-up pytest
per mutant and runs only the tests of the group that reach the mutated function, each under a
timeout derived from the tests' own duration.  Then it reads mutmut's verdicts back and writes
``build/mutation/REPORT.md`` and ``report.json``: per module the mutants made, killed (a test failed),
survived, and those that change no behaviour, with the reason, taken from
``tools/mutants_equivalent.toml`` (an entry names a mutant and the code line it makes, so an entry
that no longer matches its mutant is reported as stale and does not count).

Lines left alone (``do_not_mutate_patterns``): the text of exception messages (a ``raise`` line) and a
rule's human-readable detail beside a plain name (``return None, "..."``): wording, not behaviour.  A
detail that starts with a constant's value (``return None, f"{HEDGED_PREFIX}..."``) is mutated: readers
test that prefix (the hedged answers are counted apart).  A surviving mutant that changes only the
detail's words beside an unchanged prediction and an unchanged prefix is counted as "message"
(:func:`message_only`), not as a survivor.

Why mutmut: it is the field's tool and works with this layout (a pytest plugin package whose tests use
pytester): it copies the tree, rewrites each function into a trampoline that a per-mutant environment
variable switches, records which tests reach which function, and forks a warmed-up pytest per mutant,
about 0.2-0.5 mutants a second on two shared cores where a fresh pytest per mutant would take 5-20 s.
Functions left alone: those another change is rewriting (a group's ``deferred``: none at present), to be
mutated once it lands.  A mutant no test of its group reaches (mutmut's "no tests") counts as a survivor.

Usage::

    python tools/mutants.py run [GROUP ...]      # all groups by default; then the report
    python tools/mutants.py report               # the report of what has run
    python tools/mutants.py survivors [GROUP]    # the diff of every surviving mutant not yet listed
    python tools/mutants.py rerun GROUP [NAME...] # re-test the survivors (or the named mutants) after adding tests

``--fresh`` lays the group's copy anew (mutmut otherwise keeps verdicts of unchanged functions).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import subprocess
import sys
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "build" / "mutation"
EQUIVALENT_FILE = ROOT / "tools" / "mutants_equivalent.toml"
PACKAGE = "pytest_benchaudit"


@dataclass(frozen=True)
class Group:
    """Modules mutated together and the test files that cover them."""

    modules: tuple[str, ...]  # paths under pytest_benchaudit/
    tests: tuple[str, ...]  # test files (or node ids) run for these modules' mutants
    deferred: tuple[str, ...] = field(default=())  # function names left alone (another change rewrites them)


# The map from module to test files.  Only unit-level files: the end-to-end pytester runs import the
# installed package in a subprocess, where no mutant is active, and would only cost time.
GROUPS: dict[str, Group] = {
    "cvss": Group(
        ("scoring/tasks/cvss.py",),
        (
            "tests/scoring/test_tasks_cti_athena.py",
            "tests/scoring/test_scoring.py",
            "tests/scoring/test_cvss_mutants.py",
        ),
    ),
    "extract": Group(
        ("scoring/extract.py",),
        (
            "tests/scoring/test_extract.py",
            "tests/scoring/test_conformance.py",
            "tests/scoring/test_extract_mutants.py",
            "tests/scoring/test_peer_inspect_rule.py",
        ),
    ),
    "metrics": Group(
        ("scoring/metrics.py",),
        (
            "tests/scoring/test_scoring.py",
            "tests/scoring/test_declarations.py",
            "tests/scoring/test_metrics_mutants.py",
        ),
    ),
    "stats": Group(
        ("aggregate/stats.py",), ("tests/aggregate/test_stats.py", "tests/aggregate/test_stats_properties.py")
    ),
    "repeats": Group(
        ("aggregate/repeat_stats.py",),
        (
            "tests/aggregate/test_repeat_stats.py",
            "tests/aggregate/test_repeat_fields.py",
            "tests/aggregate/test_repeats_properties.py",
        ),
    ),
    "ranks": Group(
        ("aggregate/ranks.py",), ("tests/aggregate/test_stats.py", "tests/aggregate/test_stats_properties.py")
    ),
    "intervals": Group(
        ("aggregate/intervals.py",), ("tests/aggregate/test_intervals.py", "tests/aggregate/test_intervals_mutants.py")
    ),
    "power": Group(("aggregate/power.py",), ("tests/aggregate/test_power.py",)),
    # The rest of the pure core.
    "tasks": Group(
        tuple(
            f"scoring/tasks/{m}.py"
            for m in ("actors", "attack", "cwe", "labels", "numeric", "peer_inspect", "peer_lm_eval")
        ),
        (
            "tests/scoring/test_tasks_cti_athena.py",
            "tests/scoring/test_tasks_secbench_secure.py",
            "tests/scoring/test_actor_graph_cache.py",
            "tests/scoring/test_peer_lm_eval_rule.py",
            "tests/scoring/test_peer_inspect_rule.py",
            "tests/scoring/test_scoring.py",
            "tests/scoring/test_extract.py",
        ),
    ),
    "evaluate": Group(
        ("scoring/evaluate.py",),
        (
            "tests/scoring/test_evaluate_record.py",
            "tests/scoring/test_record_properties.py",
            "tests/scoring/test_evaluate_mutants.py",
        ),
    ),
    "results": Group(
        ("aggregate/results.py", "aggregate/deltas.py"),
        (
            "tests/aggregate/test_aggregate.py",
            "tests/aggregate/test_intervals.py",
            "tests/aggregate/test_repeat_stats.py",
            "tests/aggregate/test_summary_documents.py",
        ),
    ),
    "pipeline": Group(
        tuple(
            f"pipeline/{m}.py"
            for m in ("assembly", "card", "readiness", "record_documents", "record", "stages", "types", "variants")
        ),
        (
            "tests/pipeline/test_card.py",
            "tests/pipeline/test_readiness_assembly.py",
            "tests/pipeline/test_pipeline.py",
            "tests/pipeline/test_record_documents.py",
        ),
    ),
}

# Lines whose only mutants would change the wording of a message (see the module docstring).
MESSAGE_LINES = (
    r"^\s*raise \w+(\.\w+)*\(",
    # a detail that does not start with a constant's value such as {HEDGED_PREFIX} (see the docstring)
    r"^\s*return (None|\w+), f?[\"'](?!\{[A-Z][A-Z0-9_]*\})",
)

# mutmut's exit codes of a mutant's test run (mutmut.stats.status_by_exit_code), folded.
KILLED = {1, 3}
TIMEOUT = {24, -24, 36, 152, 255}


def _setup_cfg(group: Group) -> str:
    patterns = list(MESSAGE_LINES) + [rf"^\s*def {name}\(" for name in group.deferred]

    def block(key: str, values: list[str]) -> str:
        return f"{key}=\n" + "".join(f"    {v}\n" for v in values)

    return (
        "[mutmut]\n"
        f"source_paths={PACKAGE}\n"
        + block("only_mutate", [f"{PACKAGE}/{m}" for m in group.modules])
        + block("do_not_mutate_patterns", patterns)
        + block("also_copy", ["suites", "README.md", "docs", "bench"])
        + block("pytest_add_cli_args_test_selection", [t for t in group.tests if (ROOT / t).exists()])
        + block("pytest_add_cli_args", ["-p", "no:cacheprovider", "-q"])
        # Fork each mutant's test run from a server that has only collected the tests: forked from
        # mutmut's own process, it would inherit caches the clean run filled (the lru_cache'd label
        # patterns of extract.py), and a mutant of a cached function would never run.
        + "process_isolation=forkserver\n"
        + "timeout_multiplier=10.0\n"
        + "timeout_constant=20.0\n"
    )


def _checkout_files() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True, capture_output=True
    ).stdout.decode()
    return [p for p in out.split("\0") if p]


def lay(name: str, fresh: bool) -> Path:
    """Copy the checkout into the group's work directory (changed files only, unless ``fresh``)."""
    group = GROUPS[name]
    where = WORK / name
    if fresh and where.exists():
        shutil.rmtree(where)
    where.mkdir(parents=True, exist_ok=True)
    for rel in _checkout_files():
        src, dst = ROOT / rel, where / rel
        if src.is_symlink():
            if not dst.is_symlink():
                dst.parent.mkdir(parents=True, exist_ok=True)
                if dst.exists():
                    shutil.rmtree(dst) if dst.is_dir() else dst.unlink()
                os.symlink(os.readlink(src), dst)
            continue
        if not src.is_file():
            continue
        if dst.exists() and dst.read_bytes() == src.read_bytes():
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)
    (where / "setup.cfg").write_text(_setup_cfg(group))
    return where


def _mutmut(where: Path, *args: str) -> int:
    env = dict(os.environ)
    data = ROOT.parent / "shared" / "datasets"
    if "BENCHAUDIT_DATA" not in env and data.is_dir():
        env["BENCHAUDIT_DATA"] = str(data)
    exe = Path(sys.executable).with_name("mutmut")
    return subprocess.run([str(exe), *args], cwd=where, env=env).returncode


# --------------------------------------------------------------------------- verdicts and report


def _verdicts(name: str) -> dict[str, dict[str, int | None]]:
    """{module path: {mutant name: exit code}} from mutmut's .meta files of the group."""
    out: dict[str, dict[str, int | None]] = {}
    for module in GROUPS[name].modules:
        meta = WORK / name / "mutants" / PACKAGE / f"{module}.meta"
        if meta.exists():
            out[module] = json.loads(meta.read_text())["exit_code_by_key"]
    return out


# Asks mutmut for the diffs of many mutants of a group in one process (``mutmut show`` starts one per mutant).
_DIFFS_SCRIPT = """
import json, sys
from mutmut.mutation.diff_apply import get_diff_for_mutant
asked = json.load(sys.stdin)
print(json.dumps({m: get_diff_for_mutant(m, path=path) for m, path in asked.items()}))
"""
_DIFF_CACHE: dict[tuple[str, str], str] = {}


def _module_of(mutant: str) -> str:
    """The source path of a mutant (``pytest_benchaudit.aggregate.stats.x_f__mutmut_3`` -> its .py file)."""
    return mutant.rsplit(".", 1)[0].replace(".", "/") + ".py"


def _prefetch_diffs(name: str, mutants: list[str]) -> None:
    """Fill the diff cache for ``mutants`` of group ``name`` (one mutmut process for all of them)."""
    asked = {m: _module_of(m) for m in mutants if (name, m) not in _DIFF_CACHE}
    if not asked:
        return
    done = subprocess.run(
        [sys.executable, "-c", _DIFFS_SCRIPT], cwd=WORK / name, input=json.dumps(asked), capture_output=True, text=True
    )
    if done.returncode == 0:
        for m, diff in json.loads(done.stdout).items():
            _DIFF_CACHE[(name, m)] = diff


def _diff(name: str, mutant: str) -> str:
    if (name, mutant) not in _DIFF_CACHE:
        exe = Path(sys.executable).with_name("mutmut")
        _DIFF_CACHE[(name, mutant)] = subprocess.run(
            [str(exe), "show", mutant], cwd=WORK / name, capture_output=True, text=True
        ).stdout
    return _DIFF_CACHE[(name, mutant)]


def _mutated_line(diff: str) -> str:
    """The first line the mutant adds, stripped (what an equivalent entry quotes)."""
    for line in diff.splitlines():
        if line.startswith("+") and not line.startswith("+++"):
            return line[1:].strip()
    return ""


def _removed_line(diff: str) -> str:
    for line in diff.splitlines():
        if line.startswith("-") and not line.startswith("---"):
            return line[1:].strip()
    return ""


def _detail_head(node: ast.expr) -> str | None:
    """What of a rule's detail a reader tests: the constant it starts with (``HEDGED_PREFIX`` in
    ``f"{HEDGED_PREFIX}..."``), "" for a detail that starts with its words, None for no string at all."""
    if isinstance(node, ast.Constant):
        return "" if isinstance(node.value, str) else None
    if not isinstance(node, ast.JoinedStr):
        return None
    first = node.values[0] if node.values else None
    if (
        isinstance(first, ast.FormattedValue)
        and isinstance(first.value, ast.Name)
        and first.value.id.isupper()
        and first.conversion == -1
        and first.format_spec is None
    ):
        return first.value.id
    return ""


def message_only(diff: str) -> bool:
    """Whether the mutant changes only a rule's human-readable detail: ``return X, "text"`` with the same X
    (and the same leading constant, when the detail starts with one: :func:`_detail_head`).

    A rule's contract makes its detail a note for people (scoring/extract.py); the prediction beside it is
    what is scored.  Lines that cannot be parsed alone (a statement over several lines) are never counted.
    """
    try:
        before = ast.parse(_removed_line(diff)).body
        after = ast.parse(_mutated_line(diff)).body
    except SyntaxError:
        return False
    if len(before) != 1 or len(after) != 1:
        return False
    b, a = before[0], after[0]
    if not (
        isinstance(b, ast.Return)
        and isinstance(a, ast.Return)
        and isinstance(b.value, ast.Tuple)
        and isinstance(a.value, ast.Tuple)
    ):
        return False
    bx, ax = b.value.elts, a.value.elts
    if len(bx) != 2 or len(ax) != 2 or ast.dump(bx[0]) != ast.dump(ax[0]):
        return False
    # The same prefix a reader tests ("XX" put before it makes the detail start with text): words only after it.
    head = _detail_head(bx[1])
    return head is not None and _detail_head(ax[1]) == head


def _equivalents() -> dict[str, dict[str, str]]:
    if not EQUIVALENT_FILE.exists():
        return {}
    return {e["mutant"]: e for e in tomllib.loads(EQUIVALENT_FILE.read_text()).get("mutant", [])}


@dataclass
class ModuleRow:
    """One module's verdicts."""

    group: str
    total: int = 0
    killed: int = 0  # a test failed
    timeout: int = 0  # the tests ran past their time: an endless loop the run noticed
    not_run: int = 0
    survived: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)  # survivors whose equivalent entry no longer matches
    equivalent: list[dict[str, str]] = field(default_factory=list)

    @property
    def caught(self) -> int:
        return self.killed + self.timeout

    @property
    def behaviour_changing(self) -> int:
        return self.total - self.not_run - len(self.equivalent)


def report(groups: list[str] | None = None) -> dict[str, ModuleRow]:
    """Per module (of ``groups``, default all): mutants made, killed, survived, and those that change no
    behaviour (with the reason)."""
    listed = _equivalents()
    rows: dict[str, ModuleRow] = {}
    for name in groups or GROUPS:
        verdicts = _verdicts(name)
        _prefetch_diffs(
            name,
            [
                m
                for codes in verdicts.values()
                for m, code in codes.items()
                if code is not None and code not in KILLED and code not in TIMEOUT
            ],
        )
        for module, codes in verdicts.items():
            row = rows[module] = ModuleRow(group=name)
            for mutant, code in sorted(codes.items()):
                row.total += 1
                if code is None:
                    row.not_run += 1
                elif code in KILLED:
                    row.killed += 1
                elif code in TIMEOUT:
                    row.timeout += 1
                elif mutant not in listed:
                    if message_only(_diff(name, mutant)):
                        row.equivalent.append(
                            {
                                "mutant": mutant,
                                "kind": "message",
                                "reason": "changes only the rule's detail text beside an unchanged prediction",
                            }
                        )
                    else:
                        row.survived.append(mutant)
                elif _mutated_line(_diff(name, mutant)) != listed[mutant]["line"].strip():
                    row.stale.append(mutant)
                    row.survived.append(mutant)
                else:
                    row.equivalent.append(
                        {"mutant": mutant, "kind": listed[mutant]["kind"], "reason": listed[mutant]["reason"]}
                    )
    return rows


def _share(caught: int, base: int) -> str:
    return f"{caught}/{base} = {100 * caught / base:.1f}%" if base else "-"


def write_report(rows: dict[str, ModuleRow]) -> str:
    """REPORT.md and report.json under build/mutation/; returns the Markdown."""
    lines = [
        "# Mutation check of the pure core",
        "",
        "| module | mutants | killed | timeout | not run | no behaviour | survived | killed / behaviour-changing |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for module, r in sorted(rows.items()):
        lines.append(
            f"| {module} | {r.total} | {r.killed} | {r.timeout} | {r.not_run} | {len(r.equivalent)} | "
            f"{len(r.survived)} | {_share(r.caught, r.behaviour_changing)} |"
        )
    every = list(rows.values())
    lines.append(
        f"| **all** | {sum(r.total for r in every)} | {sum(r.killed for r in every)} | "
        f"{sum(r.timeout for r in every)} | {sum(r.not_run for r in every)} | "
        f"{sum(len(r.equivalent) for r in every)} | {sum(len(r.survived) for r in every)} | "
        f"{_share(sum(r.caught for r in every), sum(r.behaviour_changing for r in every))} |"
    )
    for module, r in sorted(rows.items()):
        if r.survived or r.equivalent:
            lines += ["", f"## {module}"]
        lines += [f"- survived{' (stale equivalent entry)' if m in r.stale else ''}: `{m}`" for m in r.survived]
        lines += [f"- {e['kind']}: `{e['mutant']}`: {e['reason']}" for e in r.equivalent]
    text = "\n".join(lines) + "\n"
    WORK.mkdir(parents=True, exist_ok=True)
    (WORK / "REPORT.md").write_text(text)
    (WORK / "report.json").write_text(json.dumps({m: asdict(r) for m, r in rows.items()}, indent=1))
    return text


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("command", choices=["run", "report", "survivors", "rerun"])
    p.add_argument("args", nargs="*", help="groups (run, survivors), or a group then mutant names (rerun)")
    p.add_argument("--fresh", action="store_true", help="lay each group's copy anew")
    a = p.parse_intermixed_args(argv)  # "run --fresh extract" as well as "run extract --fresh"
    if a.command in ("run", "survivors"):
        unknown = [g for g in a.args if g not in GROUPS]
        if unknown:
            p.error(f"unknown group(s) {', '.join(unknown)}; groups: {', '.join(GROUPS)}")
    if a.command == "run":
        for name in a.args or list(GROUPS):
            print(f"== mutants: {name} ({', '.join(GROUPS[name].modules)})", flush=True)
            where = lay(name, a.fresh)
            _mutmut(where, "run")
            print(flush=True)
    elif a.command == "rerun":
        if not a.args or a.args[0] not in GROUPS:
            p.error(f"rerun GROUP NAME...; groups: {', '.join(GROUPS)}")
        names = a.args[1:] or [m for r in report([a.args[0]]).values() for m in r.survived]
        if not names:
            print(f"== mutants: {a.args[0]}: no survivor to re-test")
        else:
            _mutmut(lay(a.args[0], False), "run", *names)
        print(flush=True)
    elif a.command == "survivors":
        for _module, r in sorted(report(a.args or None).items()):
            for m in r.survived:
                print(_diff(r.group, m))
        return 0
    print(write_report(report()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
