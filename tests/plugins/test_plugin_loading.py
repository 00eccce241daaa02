"""Plugins through entry points: each test installs a real distribution's metadata (a ``*.dist-info``
folder with ``entry_points.txt``, found by importlib.metadata on sys.path) and its module, and loads
them through the one door (pluggy's ``load_setuptools_entrypoints("benchaudit")``)."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_benchaudit.cli.app import main
from pytest_benchaudit.plugins import plugin_manager
from pytest_benchaudit.plugins.plugin_manager import PluginError, load_plugins, unload_plugins
from pytest_benchaudit.scoring import extract, metrics
from pytest_benchaudit.testing.runs import write_run_dir


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("BENCHAUDIT_DISABLE_PLUGINS", raising=False)
    unload_plugins()
    yield
    unload_plugins()


def install(root: Path, monkeypatch: pytest.MonkeyPatch, name: str, module: str, code: str) -> None:
    """A distribution ``bench-<name>`` 1.2.3 whose entry point ``name`` in the group benchaudit is ``module``."""
    (root / f"{module}.py").write_text(textwrap.dedent(code), encoding="utf-8")
    info = root / f"bench_{name}-1.2.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: bench-{name}\nVersion: 1.2.3\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[benchaudit]\n{name} = {module}\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(root))


GOOD = """
    from pytest_benchaudit.api import Score, hookimpl, metric, rule

    @rule(name="shout_rule", answers="label")
    def shout(text, question, generation):
        return text.strip()[-1:] or None, "last character"

    @metric(name="shout_metric", lower_is_better=False, kind="binary", description="right or not")
    def shout_metric(prediction, question, resources):
        return Score(value=float(prediction == question.gold), correct=prediction == question.gold)

    @hookimpl
    def benchaudit_rules():
        return [shout]

    @hookimpl
    def benchaudit_metrics():
        return [shout_metric]
"""


def test_a_plugin_registers_its_rule_and_metric_and_is_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    install(tmp_path, monkeypatch, "shout", "bench_shout_plugin", GOOD)
    assert main(["plugins", "--json"]) == 0
    listed = {p["name"]: p for p in json.loads(capsys.readouterr().out)["plugins"]}
    assert listed["shout"]["distribution"] == "bench-shout" and listed["shout"]["version"] == "1.2.3"
    assert listed["shout"]["module"] == "bench_shout_plugin"
    assert listed["shout"]["registered"]["rules"] == ["shout_rule"]
    assert listed["shout"]["registered"]["metrics"] == ["shout_metric"]
    # the built-ins come through the same hooks
    assert "final_answer_letter" in listed["builtin"]["registered"]["rules"]
    assert "json" in listed["builtin"]["registered"]["readers"]
    assert "peer_gaps" in listed["builtin"]["registered"]["analyses"]
    assert "shout_rule" in extract.RULES and metrics.METRIC_INFO["shout_metric"].kind == "binary"
    unload_plugins()  # what it added goes again
    assert "shout_rule" not in extract.RULES and "shout_metric" not in metrics.METRIC_INFO


def test_disable_plugin_by_option_and_by_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install(tmp_path, monkeypatch, "shout", "bench_shout_plugin", GOOD)
    assert "shout" not in load_plugins(["shout"]).infos and "shout_rule" not in extract.RULES
    assert "shout_rule" in extract.RULES if load_plugins([]) else False
    monkeypatch.setenv("BENCHAUDIT_DISABLE_PLUGINS", "other, shout")
    assert "shout" not in load_plugins().infos and "shout_rule" not in extract.RULES
    with pytest.raises(PluginError, match="--disable-plugin shuot: no plugin of that name.*did you mean 'shout'"):
        load_plugins(["shuot"])


@pytest.mark.parametrize(
    ("code", "message"),
    [
        (
            "import no_such_module_here\n",
            r"plugin 'bad' \(distribution bench-bad 1.2.3\) cannot be imported \(bench_bad_plugin\): "
            r"ModuleNotFoundError: No module named 'no_such_module_here'; turn it off with --disable-plugin bad",
        ),
        (
            "from pytest_benchaudit.api import hookimpl\n@hookimpl\ndef benchaudit_rules():\n    raise KeyError('x')\n",
            r"plugin 'bad' \(distribution bench-bad 1.2.3\): benchaudit_rules\(\) raised KeyError: 'x' \(registering its "
            r"rules\); turn it off with --disable-plugin bad or BENCHAUDIT_DISABLE_PLUGINS=bad",
        ),
        (
            "from pytest_benchaudit.api import hookimpl, rule\n@rule(name='final_answer_letter')\ndef f(t, q, g):\n"
            "    return None, ''\n@hookimpl\ndef benchaudit_rules():\n    return [f]\n",
            r"plugin 'bad' \(distribution bench-bad 1.2.3\): rule 'final_answer_letter' is already registered by the "
            r"built-ins; turn it off",
        ),
        (
            "from pytest_benchaudit.api import hookimpl, metric\n@metric(name='m2')\ndef f(p, q, r):\n    return None\n"
            "@hookimpl\ndef benchaudit_metrics():\n    return [f]\n",
            r"plugin 'bad': metric 'm2' declares no direction and scale",
        ),
        (
            "from pytest_benchaudit.api import hookimpl\n@hookimpl\ndef benchaudit_rulez():\n    return []\n",
            r"plugin 'bad' \(distribution bench-bad 1.2.3\): unknown hook 'benchaudit_rulez'",
        ),
    ],
)
def test_a_broken_plugin_is_one_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], code: str, message: str
) -> None:
    module = f"bench_bad_plugin_{abs(hash(code))}"  # a module name of its own: sys.modules keeps imports
    install(tmp_path, monkeypatch, "bad", module, code)
    message = message.replace("bench_bad_plugin", module)
    assert main(["plugins"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert __import__("re").search(message, err), err
    assert main(["plugins", "--disable-plugin", "bad"]) == 0  # the way out it names works


def test_a_plugin_clashing_with_another_names_both(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install(tmp_path, monkeypatch, "shout", "bench_shout_plugin", GOOD)
    install(tmp_path, monkeypatch, "echo", "bench_echo_plugin", GOOD)
    with pytest.raises(PluginError, match=r"rule 'shout_rule' is already registered by plugin '(shout|echo)'"):
        load_plugins()
    assert "shout_rule" not in extract.RULES  # a failed load leaves nothing behind
    assert plugin_manager._LOADED is None


ANALYSIS_AND_IMPORTER = """
    from pathlib import Path
    from pytest_benchaudit.api import Analysis, hookimpl

    SPREAD = Analysis(name="score_spread", compute=lambda ctx: {"ok": 1}, text=lambda part: "Score spread")

    class Fake:
        name = "fake-source"
        help = "a folder with done.txt"

        def detect(self, path):
            return (Path(path) / "done.txt").exists()

        def import_runs(self, source, report_dir, suites_dir, data_dir, log):
            log(f"reading {source}")
            return [Path(report_dir) / "one", Path(report_dir) / "two"]

    @hookimpl
    def benchaudit_analyses():
        return [SPREAD]

    @hookimpl
    def benchaudit_importers():
        return [Fake()]
"""


def test_a_plugin_adds_an_analysis_and_an_importer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_benchaudit.compare.analysis_registry import analyses

    install(tmp_path, monkeypatch, "extra", "bench_extra_plugin", ANALYSIS_AND_IMPORTER)
    assert plugin_manager.load_analyses() == ["score_spread"]
    assert [a.name for a in analyses()][-1] == "score_spread"
    assert main(["import", "fake-source", str(tmp_path), "--report-dir", str(tmp_path / "out")]) == 0
    out = tmp_path / "out"
    assert capsys.readouterr().out.splitlines() == [
        f"reading {tmp_path}",
        f"  {out / 'one'}",
        f"  {out / 'two'}",
        f"2 run directories written under {out}",
    ]
    assert plugin_manager.importers()["fake-source"].detect(tmp_path) is False
    # without a source, a path the plugin's importer detects is imported by it (after the built-ins said no)
    (tmp_path / "done.txt").write_text("x")
    assert main(["import", str(tmp_path), "--report-dir", str(out)]) == 0
    assert capsys.readouterr().out.splitlines()[:2] == [f"detected fake-source in {tmp_path}", f"reading {tmp_path}"]
    unload_plugins()
    assert "score_spread" not in [a.name for a in analyses()]


ON_REQUEST = """
    from pytest_benchaudit.api import hookimpl
    from pytest_benchaudit.compare.analysis_registry import Analysis

    def _models(ctx):
        return {key: sorted(by_model) for key, by_model in sorted(ctx.set_a.results.items())}

    COUNT = Analysis(name="model_count", compute=_models, text=lambda part: "Models per task", on_request=True)

    @hookimpl
    def benchaudit_analyses():
        return [COUNT]
"""


def _toy_run(root: Path, name: str, model: str, scores: list[float]) -> Path:
    records = [
        {"question_id": f"q{i}", "question_index": i, "model": model, "task": "mcq", "score": s, "correct": s == 1.0}
        for i, s in enumerate(scores)
    ]
    run = write_run_dir(root, name, records)
    card = {"fields": {"scoring.metric": "exact_match", "scoring.denominator": "total"}}
    (run / "run.json").write_text(json.dumps({"run_id": name, "pipeline_cards": {"toy.mcq": card}}))
    return run


def test_a_plugins_on_request_analysis_runs_when_compare_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An analysis with on_request=True is asked for with `compare --analysis NAME`: without it compare.json has no
    part of it; a name that is not one, or a built-in that has its own flag, is one error (exit 2)."""
    install(tmp_path, monkeypatch, "count", "bench_count_plugin", ON_REQUEST)
    runs = [str(_toy_run(tmp_path / "runs", n, m, [1.0, 0.0, 1.0, 1.0])) for n, m in (("r1", "m1"), ("r2", "m2"))]
    common = ["--resamples", "50", "--permutations", "10"]
    assert main(["compare", *runs, "--out", str(tmp_path / "plain"), *common]) == 0
    assert "model_count" not in json.loads((tmp_path / "plain" / "compare.json").read_text())
    capsys.readouterr()
    assert main(["compare", *runs, "--out", str(tmp_path / "asked"), "--analysis", "model_count", *common]) == 0
    assert json.loads((tmp_path / "asked" / "compare.json").read_text())["model_count"] == {"toy.mcq": ["m1", "m2"]}
    assert "Models per task" in capsys.readouterr().out
    assert main(["compare", *runs, "--out", str(tmp_path / "x"), "--analysis", "model_cont", *common]) == 2
    err = capsys.readouterr().err
    assert "no such analysis (did you mean 'model_count'?); on-request analyses: model_count" in err, err
    assert main(["compare", *runs, "--out", str(tmp_path / "x"), "--analysis", "similarity", *common]) == 2
    assert "asked for with --similarity" in capsys.readouterr().err
    assert main(["compare", *runs, "--out", str(tmp_path / "x"), "--analysis", "peer_gaps", *common]) == 2
    assert "always runs" in capsys.readouterr().err
