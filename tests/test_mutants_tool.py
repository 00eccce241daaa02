"""tools/mutants.py, the runner of ``make mutants`` (issue 33, item 15): its map from module to tests,
the lines it leaves alone, what it counts as a change of wording only, and the list of equivalent
mutants.  mutmut itself is not needed here (nor run).
"""

from __future__ import annotations

import importlib.util
import re
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load_tool():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("benchaudit_mutants_tool", ROOT / "tools" / "mutants.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


tool = _load_tool()


def _diff(before: str, after: str) -> str:
    return f"--- a.py\n+++ a.py\n@@ -1 +1 @@\n-    {before}\n+    {after}\n"


def test_every_group_names_files_that_exist_and_the_named_modules_are_mapped() -> None:
    mapped = {m for g in tool.GROUPS.values() for m in g.modules}
    for name, group in tool.GROUPS.items():
        for module in group.modules:
            assert (ROOT / "pytest_benchaudit" / module).is_file(), (name, module)
        for test in group.tests:
            assert (ROOT / test).is_file(), (name, test)
    # the five modules issue 33 names, and the interval, paired and power functions
    assert {
        "scoring/extract.py",
        "scoring/metrics.py",
        "aggregate/stats.py",
        "aggregate/repeat_stats.py",
        "scoring/tasks/cvss.py",
        "aggregate/intervals.py",
        "aggregate/power.py",
    } <= mapped
    assert len(mapped) == sum(len(g.modules) for g in tool.GROUPS.values())  # a module in one group only


def test_message_lines_leave_words_alone_but_not_a_prefix_a_reader_tests() -> None:
    def left_alone(line: str) -> bool:
        return any(re.search(p, line) for p in tool.MESSAGE_LINES)

    assert left_alone('        raise ValueError(f"no {x}")')
    assert left_alone('    return None, "no <xml>X</xml> with an option letter"')
    assert left_alone('    return None, f"{value[:60]!r} does not parse"')  # starts with a value, not a constant
    assert not left_alone('            return None, f"{HEDGED_PREFIX}\'or\' between options: {line!r}"')
    assert not left_alone("    return None, NO_LOGPROBS_PREFIX + detail")
    assert not left_alone("    return letter, detail")


def test_a_change_of_wording_only_is_told_from_a_change_of_what_is_read() -> None:
    assert tool.message_only(_diff('return None, "no answer"', 'return None, "XXno answerXX"'))
    assert tool.message_only(
        _diff('return None, f"{HEDGED_PREFIX}or: {x!r}"', 'return None, f"{HEDGED_PREFIX}XXor: {x!r}"')
    )
    # the prefix a reader tests, moved or gone: not wording
    assert not tool.message_only(
        _diff('return None, f"{HEDGED_PREFIX}or: {x!r}"', 'return None, f"XX{HEDGED_PREFIX}or"')
    )
    assert not tool.message_only(_diff('return None, f"{HEDGED_PREFIX}or"', 'return None, "or"'))
    # the prediction changed, or no detail at all
    assert not tool.message_only(_diff('return None, "no answer"', 'return "A", "no answer"'))
    assert not tool.message_only(_diff("return None, detail", "return None, None"))
    assert not tool.message_only(_diff("x = 1", "x = 2"))
    assert not tool.message_only(_diff('return None, ("a"', 'return None, ("b"'))  # a statement cut in two


def test_equivalent_entries_name_a_mapped_module_and_say_why() -> None:
    entries = tomllib.loads((ROOT / "tools" / "mutants_equivalent.toml").read_text())["mutant"]
    names = [e["mutant"] for e in entries]
    assert len(names) == len(set(names))
    modules = {f"pytest_benchaudit.{m[:-3].replace('/', '.')}" for g in tool.GROUPS.values() for m in g.modules}
    for e in entries:
        assert set(e) == {"mutant", "line", "kind", "reason"}, e["mutant"]
        assert e["mutant"].rsplit(".", 1)[0] in modules, e["mutant"]
        assert re.search(r"__mutmut_\d+$", e["mutant"]), e["mutant"]
        assert e["kind"] == "equivalent" and len(e["reason"]) > 30 and e["line"].strip() == e["line"]


def test_the_report_counts_what_the_verdicts_say(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A group's verdicts (mutmut's .meta file) become the row: killed, timeout, not run, survived, and an
    equivalent entry whose line no longer matches its mutant is stale and counted as a survivor."""
    import json

    monkeypatch.setattr(tool, "WORK", tmp_path)
    monkeypatch.setattr(tool, "GROUPS", {"g": tool.Group(("aggregate/ranks.py",), ())})
    meta = tmp_path / "g" / "mutants" / "pytest_benchaudit" / "aggregate" / "ranks.py.meta"
    meta.parent.mkdir(parents=True)
    base = "pytest_benchaudit.aggregate.ranks.x_f__mutmut_"
    meta.write_text(
        json.dumps(
            {
                "exit_code_by_key": {
                    base + "1": 1,
                    base + "2": 36,
                    base + "3": None,
                    base + "4": 0,
                    base + "5": 0,
                    base + "6": 0,
                }
            }
        )
    )
    diffs = {
        base + "4": _diff("x = 1", "x = 2"),
        base + "5": _diff("y = 1", "y = 0"),
        base + "6": _diff("z = 1", "z = 3"),
    }
    monkeypatch.setattr(tool, "_prefetch_diffs", lambda name, mutants: None)
    monkeypatch.setattr(tool, "_diff", lambda name, mutant: diffs[mutant])
    monkeypatch.setattr(
        tool,
        "_equivalents",
        lambda: {
            base + "5": {"mutant": base + "5", "line": "y = 0", "kind": "equivalent", "reason": "y is never read"},
            base + "6": {"mutant": base + "6", "line": "z = 2", "kind": "equivalent", "reason": "stale"},
        },
    )
    row = tool.report()["aggregate/ranks.py"]
    assert (row.total, row.killed, row.timeout, row.not_run) == (6, 1, 1, 1)
    assert row.survived == [base + "4", base + "6"] and row.stale == [base + "6"]
    assert [e["mutant"] for e in row.equivalent] == [base + "5"]
    assert row.behaviour_changing == 4 and row.caught == 2
    text = tool.write_report({"aggregate/ranks.py": row})
    assert "| aggregate/ranks.py | 6 | 1 | 1 | 1 | 1 | 2 | 2/4 = 50.0% |" in text
    assert "survived (stale equivalent entry)" in text
