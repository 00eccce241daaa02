"""Plugins on the pytest side: the run loads them (a broken one stops a benchmark run with one usage error,
and only warns in a pytest run that is not one), ``--disable-plugin`` turns one off, and when a local suite,
the packaged suite and a plugin's suite share a name the header says which ran.  Each plugin is a real
distribution's metadata and module on sys.path (as in test_plugin_loading.py)."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_benchaudit import __version__
from pytest_benchaudit.plugins.plugin_manager import unload_plugins
from pytest_benchaudit.pytest_plugin.paths import resolve_suite_args

SUITES = Path(__file__).resolve().parents[2] / "suites"


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("BENCHAUDIT_DISABLE_PLUGINS", raising=False)
    unload_plugins()
    yield
    unload_plugins()


def install(root: Path, name: str, module: str, code: str) -> Path:
    """A distribution ``bench-<name>`` 1.2.3 with the entry point ``name = module`` in the group benchaudit."""
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{module}.py").write_text(textwrap.dedent(code), encoding="utf-8")
    info = root / f"bench_{name}-1.2.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: bench-{name}\nVersion: 1.2.3\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[benchaudit]\n{name} = {module}\n", encoding="utf-8")
    return root


def test_a_broken_plugin_stops_a_benchmark_run_and_only_warns_elsewhere(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = install(pytester.path / "site", "bad", "bench_bad_runs", "raise RuntimeError('half-installed')\n")
    monkeypatch.setenv("PYTHONPATH", str(site))
    result = pytester.runpytest_subprocess("suites/cybermetric", "--collect-only", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: plugin 'bad' (distribution bench-bad 1.2.3) cannot be imported "
            "(bench_bad_runs): RuntimeError: half-installed; turn it off with "
            "--disable-plugin bad or BENCHAUDIT_DISABLE_PLUGINS=bad"
        ]
    )
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
    # turned off, the run goes on (the packaged suite is collected)
    result = pytester.runpytest_subprocess(
        "suites/cybermetric", "--collect-only", "-p", "no:cacheprovider", "--disable-plugin", "bad"
    )
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED), result.stderr.str()
    result.stdout.fnmatch_lines(["benchaudit: suites/cybermetric → *the suites packaged with*"])
    # a project's own tests, with the broken plugin installed beside: they run, the header warns
    pytester.makepyfile(test_mine="def test_one():\n    assert True\n")
    result = pytester.runpytest_subprocess("test_mine.py", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["benchaudit: warning: plugin 'bad' * cannot be imported*", "*1 passed*"])


PLUGIN_SUITES = """
    from pathlib import Path
    from pytest_benchaudit.api import hookimpl

    @hookimpl
    def benchaudit_suite_dirs():
        return [Path(__file__).parent / "plugin_suites"]
"""


def test_the_header_says_which_suite_of_a_name_ran(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = install(tmp_path / "site", "copies", "bench_copies_plugin", PLUGIN_SUITES)
    for name in ("cybermetric", "onlyplugin"):  # one name the package ships, one it does not
        (site / "plugin_suites" / name).mkdir(parents=True)
        (site / "plugin_suites" / name / "suite.toml").write_bytes((SUITES / "cybermetric" / "suite.toml").read_bytes())
    monkeypatch.syspath_prepend(str(site))
    work = tmp_path / "work"
    work.mkdir()
    # the packaged suite over the plugin's of the same name
    args, notes = resolve_suite_args(["suites/cybermetric"], work)
    assert args == [str(SUITES.resolve() / "cybermetric")]
    assert notes == [
        f"suites/cybermetric → {SUITES.resolve() / 'cybermetric'}: the suites packaged with "
        f"pytest-benchaudit {__version__} (no local suites/cybermetric; `benchaudit init` writes a copy "
        f"to edit); plugin 'copies' (bench-copies 1.2.3)'s suite of that name "
        f"({site.resolve() / 'plugin_suites' / 'cybermetric'}) is not used"
    ]
    # a suite only the plugin has: the plugin's, said with its distribution
    args, notes = resolve_suite_args(["suites/onlyplugin"], work)
    assert args == [str(site.resolve() / "plugin_suites" / "onlyplugin")]
    assert notes == [
        f"suites/onlyplugin → {args[0]}: the suite of plugin 'copies' (bench-copies 1.2.3) "
        "(no local suites/onlyplugin, none packaged)"
    ]
    # a local copy over both
    local = work / "suites" / "cybermetric"
    local.mkdir(parents=True)
    (local / "suite.toml").write_bytes((SUITES / "cybermetric" / "suite.toml").read_bytes())
    args, notes = resolve_suite_args(["suites/cybermetric"], work)
    assert args == ["suites/cybermetric"]
    assert notes == [
        f"suites/cybermetric: the local copy ({local}), not the one packaged with pytest-benchaudit "
        f"{__version__} or plugin 'copies''s (bench-copies 1.2.3)"
    ]
