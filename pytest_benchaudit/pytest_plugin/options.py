"""Command-line options, validated once at configure time into :class:`RunOptions`.

Every mistake in an option (an unknown ``--set`` field, a value of the wrong
type, a malformed ``--gate``, an unknown ``--model``) is a ``pytest.UsageError``
naming the option and what is allowed, before anything is collected or asked.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pytest
from typing_extensions import TypedDict

from pytest_benchaudit.common.errors import UsageError
from pytest_benchaudit.common.secrets import mask_url_credentials_in
from pytest_benchaudit.dataset.readers import resolve_data_dir
from pytest_benchaudit.inference.backend import ModelSpec, ModelSpecError, endpoint_problem, parse_model_spec
from pytest_benchaudit.inference.providers import load_providers
from pytest_benchaudit.inference.usage import PriceTable, check_prices, price_for
from pytest_benchaudit.pipeline.layering import check_override
from pytest_benchaudit.pipeline.record_documents import Cards
from pytest_benchaudit.pipeline.stages import PipelineError, parse_override
from pytest_benchaudit.pipeline.variants import parse_vary
from pytest_benchaudit.pytest_plugin.outputs import check_output_file, check_output_folder
from pytest_benchaudit.report.gates import Gate, GateError, parse_gate
from pytest_benchaudit.runs.replay import resolve_replay_spec
from pytest_benchaudit.scoring.names import check_vary

if TYPE_CHECKING:
    from pytest_benchaudit.inference.backend import ModelSpec as _ModelSpec
    from pytest_benchaudit.pipeline.stages import Pipeline as _Pipeline
    from pytest_benchaudit.pipeline.types import Question as _Question


class ItemRunner(Protocol):
    """What a benchmark item needs of the process's runner (``pytest_plugin.runner.Runner``).

    Collection hands items this interface, not the runner module, so the two modules do not
    import each other.
    """

    def run_item(self, item: Any, question: _Question, pipeline: _Pipeline, model: _ModelSpec) -> None: ...

    def early_asker(self, session: Any) -> Callable[[Any], bool] | None:
        """What collection hands each item to as it makes it (``pytest_plugin.early``), or ``None``."""


__all__ = [
    "ItemRunner",
    "RunOptions",
    "RunState",
    "item_runner",
    "add_options",
    "build_options",
    "get_options",
    "OPTIONS_KEY",
    "parse_vary",
    "default_cache_dir",
    "check_output_file",
    "check_output_folder",
]


class _ModelUpdate(TypedDict, total=False):
    """What the options change of each ``--model``'s spec (``ModelSpec.model_copy(update=...)``)."""

    strict_provider: bool
    min_max_tokens: int | None
    max_retries: int
    timeout: float


@dataclass
class RunState:
    """What collection learns and the runner needs (filled per process)."""

    cards: Cards = field(default_factory=dict)
    checksums: dict[str, str] = field(default_factory=dict)
    runner: ItemRunner | None = None


@dataclass
class RunOptions:
    pipeline: str  # the layer; with --pipelines, the first one listed (the base)
    overrides: list[tuple[str, Any]]
    models: list[ModelSpec]
    data_dir: Path
    data_origin: str
    limit: int | None
    concurrency: int | None
    report_dir: Path
    gates: list[Gate]
    # --vary FIELD=v1,v2: each value is one variant changing only that field from the base.
    vary: list[tuple[str, list[Any]]] = field(default_factory=list)
    cache_dir: Path | None = None  # None: generation cache off (--no-cache)
    cache_expiry_s: float | None = None  # --cache-expiry: older cached generations are asked again
    resume: Path | None = None  # --resume RUN_DIR
    judge: ModelSpec | None = None  # --judge SPEC: the model that extracts or grades, never the one evaluated
    notes: list[str] = field(default_factory=list)  # one line each, said in the report header (model resolution)
    max_cost: float | None = None  # --max-cost USD: stop asking once the run has spent this much
    prices: PriceTable = field(default_factory=PriceTable)  # [tool.benchaudit.prices]
    state: RunState = field(default_factory=RunState)
    pipelines: list[str] = field(default_factory=list)  # --pipelines A,B: every layer, in order; [] for --pipeline
    # A field an option of its own sets (--repeats K: inference.repeats) -> that option as given, so that
    # an error names what the user typed (apply_overrides' ``options``).
    override_options: dict[str, str] = field(default_factory=dict)

    @property
    def layers(self) -> list[str]:
        """The layers items run under: ``--pipelines``' list, else ``[--pipeline]``."""
        return self.pipelines or [self.pipeline]


OPTIONS_KEY = pytest.StashKey[RunOptions]()


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("benchaudit", "LLM benchmarks as test suites (pytest-benchaudit)")
    group.addoption(
        "--disable-plugin",
        action="append",
        default=[],
        metavar="NAME",
        help="turn off the installed benchaudit plugin NAME (an entry point in the group `benchaudit`; "
        "repeatable; also BENCHAUDIT_DISABLE_PLUGINS=a,b). `benchaudit plugins` lists them",
    )
    group.addoption(
        "--model",
        action="append",
        default=[],
        metavar="SPEC",
        help="model to evaluate (repeatable). Forms: 'local' (the default: embedded SmolLM2-135M "
        "served by llama-cpp-python on 127.0.0.1); PROVIDER/MODEL (openai/, azure/, anthropic/, "
        "gemini/, openrouter/, together/, groq/, deepseek/, mistral/, ollama/, vllm/MODEL@URL) or a "
        "well-known name (gpt-5.4, o3, claude-..., gemini-...), key and base URL from the "
        "provider's environment variables; 'vllm:HF_ID' (`vllm serve HF_ID` launched on "
        "127.0.0.1 for the run; extra arguments in $BENCHAUDIT_VLLM_ARGS); 'ID@URL' (any "
        "OpenAI-compatible endpoint, key from $OPENAI_API_KEY); 'ID@URL1,URL2,...' (one model "
        "balanced over several endpoints); 'replay:RUN_DIR' or 'replay:RUN_DIR#MODEL' (a run's "
        "stored generations, no model); 'NAME' (a model under [tool.benchaudit.models.NAME] in "
        "pyproject.toml)",
    )
    group.addoption(
        "--strict-provider",
        action="store_true",
        default=False,
        help="send exactly what the pipeline layer says: no provider quirk applied (Azure's minimum "
        "max_tokens, reasoning models' max_completion_tokens, ...), so the provider's refusal "
        "becomes the record",
    )
    group.addoption(
        "--max-cost",
        type=float,
        default=None,
        metavar="USD",
        help="stop asking new questions once the run's cost (prices from [tool.benchaudit.prices], for "
        "each model and the judge, whose calls it counts too) reaches USD; the rest are skipped "
        "as not asked, --resume continues them",
    )
    group.addoption(
        "--pipeline",
        default=None,
        metavar="NAME",
        help="pipeline layer: standardized (default), released, documented, or another layer a suite defines",
    )
    group.addoption(
        "--pipelines",
        default=None,
        metavar="A,B,...",
        help="run every question under each of these layers in one run (instead of --pipeline): "
        "items q0001[MODEL|LAYER], the first layer is the base of `benchaudit audit`; a "
        "generation is asked once where the layers send the same request",
    )
    group.addoption(
        "--set",
        dest="benchaudit_set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="override one pipeline field (repeatable, dotted name), e.g. inference.max_tokens=5, "
        "extraction.rule=final_line, scoring.denominator=valid; VALUE is read as JSON when it parses",
    )
    group.addoption(
        "--data-dir",
        default=None,
        metavar="DIR",
        help="benchmark data directory (one folder per benchmark, original file names); "
        "default: $BENCHAUDIT_DATA, else ~/.cache/benchaudit/datasets",
    )
    group.addoption(
        "--limit", type=int, default=None, metavar="N", help="evaluate only the first N questions of each task"
    )
    group.addoption(
        "--repeats",
        type=int,
        default=None,
        metavar="K",
        help="ask each question K times per model and layer (--set inference.repeats=K): one record "
        "per repeat, repeat k sent with seed + k where the pipeline sends a seed; a question's "
        "item passes by aggregation.reducer's verdict over the K and names them ('3/5 correct')",
    )
    group.addoption(
        "--concurrency",
        type=int,
        default=None,
        metavar="N",
        help="requests in flight per model (default: 32 for endpoints, 2 for the local model)",
    )
    group.addoption(
        "--report-dir",
        default="reports",
        metavar="DIR",
        help="where run directories (run.json, records.jsonl, summary.json) are written (default: reports/)",
    )
    group.addoption(
        "--gate",
        action="append",
        default=[],
        metavar="EXPR",
        help="quality gate (repeatable), e.g. 'seceval>=0.70', 'seceval.mcq:invalid<=0.05' or "
        "'seceval.mcq:ci_low>=0.70' (the low end of the 95%% interval the summary prints: clustered "
        "when the task groups its questions); "
        "when given, the gates alone decide the exit status",
    )
    group.addoption(
        "--vary",
        action="append",
        default=[],
        metavar="FIELD=V1,V2,...",
        help="single-field counterfactuals (repeatable): each value is a variant of the base pipeline "
        "that changes only FIELD; downstream variants reuse the base generation",
    )
    group.addoption(
        "--judge",
        default=None,
        metavar="SPEC",
        help="LLM judge (same specs as --model, independent of it) for extraction.rule=judge and "
        "judge-graded tasks (SecBench SAQ, SECURE RERT); without it those items are skipped",
    )
    group.addoption(
        "--cache-dir",
        default=None,
        metavar="DIR",
        help="generation cache directory (SQLite, shared by xdist workers and later runs); "
        "default: ~/.cache/benchaudit",
    )
    group.addoption("--no-cache", action="store_true", default=False, help="do not read or write the generation cache")
    group.addoption(
        "--cache-expiry",
        default=None,
        metavar="DURATION",
        help="cached generations older than this are asked again (e.g. 3600, 30m, 12h, 7d, 2w); "
        "default: never expire. The cache is keyed on the model, the endpoint and the model ids "
        "it serves, and each record says whether it came from the cache (from_cache)",
    )
    group.addoption(
        "--resume",
        default=None,
        metavar="RUN_DIR",
        help="continue an interrupted run: items already in RUN_DIR/records.jsonl are not asked again",
    )
    group.addoption(
        "--max-retries",
        type=int,
        default=None,
        metavar="N",
        help="retries per request on 429/5xx/connection errors (default 4)",
    )
    group.addoption(
        "--request-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="timeout of one request (default 120; 600 for the local model)",
    )


def _tool_table(rootpath: Path) -> dict[str, Any]:
    """``[tool.benchaudit]`` of the project's pyproject.toml (empty without one)."""
    pyproject = rootpath / "pyproject.toml"
    if not pyproject.is_file():
        return {}
    try:
        with pyproject.open("rb") as fh:
            data = tomllib.load(fh)
    except tomllib.TOMLDecodeError as err:
        raise pytest.UsageError(f"{pyproject}: not valid TOML: {err}") from None
    return data.get("tool", {}).get("benchaudit", {})


def _named_models(rootpath: Path) -> dict[str, dict[str, Any]]:
    return _tool_table(rootpath).get("models", {})


def build_options(config: pytest.Config) -> RunOptions:
    """Validate the options; raise ``pytest.UsageError`` with a precise message."""
    opt = config.option
    overrides: list[tuple[str, Any]] = []
    for text in opt.benchaudit_set:
        try:
            path, value = parse_override(text)
            # The value's type and its stage's own rules, now, so a typo fails at once; what relates it
            # to another stage (pass_k within repeats) is checked against each layer at collection.
            check_override(path, value)
        except PipelineError as err:
            raise pytest.UsageError(str(err)) from None
        overrides.append((path, value))
    option_names: dict[str, str] = {}  # a field set by an option of its own: errors name that option
    if opt.repeats is not None:  # sugar for --set inference.repeats=K: the card and the hashes record it
        if opt.repeats < 1:
            raise pytest.UsageError(
                f"--repeats {opt.repeats}: expected a whole number >= 1 (how many times each "
                "question is asked; 1: once)"
            )
        given = dict(overrides).get("inference.repeats", opt.repeats)
        if given != opt.repeats:
            raise pytest.UsageError(f"--repeats {opt.repeats} and --set inference.repeats={given}: give one")
        if "inference.repeats" not in dict(overrides):
            option_names["inference.repeats"] = f"--repeats {opt.repeats}"
        overrides.append(("inference.repeats", opt.repeats))
    tool = _tool_table(config.rootpath)
    named = tool.get("models", {})
    try:
        providers = load_providers(tool.get("providers"))
        prices = check_prices(tool.get("prices"))
    except UsageError as err:
        raise pytest.UsageError(str(err)) from None
    models: list[ModelSpec] = []
    notes: list[str] = []
    for spec in opt.model or ["local"]:
        try:
            m = parse_model_spec(spec, named, providers)
            if m.kind == "replay":
                m = resolve_replay_spec(m)
        except ModelSpecError as err:
            raise pytest.UsageError(str(err)) from None
        _check_endpoint(m, spec, "--model")
        if m.resolved_note:
            notes.append(m.resolved_note)
        update: _ModelUpdate = {}
        if opt.strict_provider:  # the layer as written: no quirk, no declared minimum
            update["strict_provider"], update["min_max_tokens"] = True, None
        if opt.max_retries is not None:
            update["max_retries"] = opt.max_retries
        if opt.request_timeout is not None:
            update["timeout"] = opt.request_timeout
        models.append(m.model_copy(update=update))
    labels = [m.label for m in models]
    if len(set(labels)) != len(labels):
        raise pytest.UsageError(f"--model given twice for the same model: {labels}")
    gates = []
    for text in opt.gate:
        try:
            gates.append(parse_gate(text))
        except GateError as err:
            raise pytest.UsageError(str(err)) from None
    if opt.limit is not None and opt.limit < 1:
        raise pytest.UsageError("--limit must be at least 1")
    if opt.concurrency is not None and opt.concurrency < 1:
        raise pytest.UsageError("--concurrency must be at least 1")
    if opt.max_retries is not None and opt.max_retries < 0:
        raise pytest.UsageError(f"--max-retries {opt.max_retries}: must be 0 or more")
    if opt.request_timeout is not None and not opt.request_timeout > 0:  # `not >` also refuses nan
        raise pytest.UsageError(f"--request-timeout {opt.request_timeout:g}: must be more than 0 seconds")
    data_dir, origin = resolve_data_dir(opt.data_dir)
    vary: list[tuple[str, list[Any]]] = []
    for text in opt.vary:
        try:
            vary.append(parse_vary(text))
            check_vary(vary[-1:])  # unknown rule / metric names are usage errors too
        except PipelineError as err:
            raise pytest.UsageError(str(err)) from None
    if opt.max_cost is not None and opt.max_cost <= 0:
        raise pytest.UsageError("--max-cost must be a positive amount in USD")
    for m in models if opt.max_cost is not None else ():
        if m.kind == "endpoint" and price_for(prices, m.label, m) is None:
            raise pytest.UsageError(
                f"--max-cost: no price for --model {m.label} in [tool.benchaudit.prices] "
                "(give it by label, PROVIDER/MODEL_ID or model id, USD per million tokens)"
            )
    judge = None
    if opt.judge:
        try:
            judge = parse_model_spec(opt.judge, named, providers)
        except ModelSpecError as err:
            raise pytest.UsageError(str(err).replace("--model", "--judge", 1)) from None
        _check_endpoint(judge, opt.judge, "--judge")
        if opt.max_cost is not None and judge.kind == "endpoint" and price_for(prices, judge.label, judge) is None:
            # The judge's tokens are spent from the same budget: unpriced, they would cost nothing there.
            raise pytest.UsageError(
                f"--max-cost: no price for --judge {judge.label} in [tool.benchaudit.prices] "
                "(give it by label, PROVIDER/MODEL_ID or model id, USD per million tokens)"
            )
    expiry = None
    if opt.cache_expiry is not None:
        from pytest_benchaudit.inference.cache import parse_expiry

        try:
            expiry = parse_expiry(opt.cache_expiry)
        except ValueError as err:
            raise pytest.UsageError(str(err)) from None
    cache_dir = None if opt.no_cache else Path(opt.cache_dir).expanduser() if opt.cache_dir else default_cache_dir()
    resume = Path(opt.resume) if opt.resume else None
    # The run directory is the controller's: an xdist worker (maybe on another host) neither has nor writes it.
    on_worker = hasattr(config, "workerinput")
    if resume is not None and not on_worker and not (resume / "records.jsonl").is_file():
        raise pytest.UsageError(f"--resume {opt.resume}: not a run directory (no records.jsonl there)")
    if not config.option.collectonly and not on_worker:
        from pytest_benchaudit.runs.store import check_report_dir

        try:
            check_report_dir(Path(opt.report_dir))  # a file in the way: one usage error now, not at the first item
        except UsageError as err:
            raise pytest.UsageError(str(err)) from None
        check_output_folder(Path(opt.report_dir), "--report-dir")  # tried: what the first report will do
    if getattr(opt, "xmlpath", None) and not on_worker:
        # pytest writes the JUnit file after the last item: a path it cannot write would ask every
        # question and then end in a traceback.
        check_output_file(Path(opt.xmlpath), "--junitxml")
    if opt.cache_dir and not opt.no_cache and not on_worker:
        # A --cache-dir given that cannot be made is a mistake to say now (the default one, in a
        # read-only home, only turns the cache off with a warning).
        check_output_folder(Path(opt.cache_dir).expanduser(), "--cache-dir")
    pipelines = _pipelines(opt.pipeline, opt.pipelines, vary)
    return RunOptions(
        pipeline=pipelines[0] if pipelines else opt.pipeline or "standardized",
        pipelines=pipelines,
        overrides=overrides,
        models=models,
        data_dir=data_dir,
        data_origin=origin,
        limit=opt.limit,
        concurrency=opt.concurrency,
        report_dir=Path(opt.report_dir),
        gates=gates,
        vary=vary,
        judge=judge,
        cache_dir=cache_dir,
        cache_expiry_s=expiry,
        resume=resume,
        notes=notes,
        max_cost=opt.max_cost,
        prices=prices,
        override_options=option_names,
    )


def _check_endpoint(spec: ModelSpec, given: str, option: str) -> None:
    """A usage error now when no request to ``spec``'s endpoint could be sent (a port out of range,
    URL credentials beside ``$OPENAI_API_KEY``: :func:`~pytest_benchaudit.inference.backend.endpoint_problem`),
    instead of the same ``inference_error`` recorded for every question."""
    problem = endpoint_problem(spec) if spec.kind == "endpoint" else None
    if problem:
        raise pytest.UsageError(f"{option} {mask_url_credentials_in(given)}: {problem}")


def _pipelines(single: str | None, text: str | None, vary: list[Any]) -> list[str]:
    """``--pipelines A,B`` as a list of two or more distinct layers ([] without it); usage errors:
    both options, an empty or repeated name, ``--vary`` beside it (a layer is already a variant of
    the first layer; vary one layer at a time with --pipeline)."""
    if text is None:
        return []
    if single is not None:
        raise pytest.UsageError(
            f"--pipeline {single} and --pipelines {text}: give one of them (--pipelines "
            "lists every layer, e.g. --pipelines released,standardized)"
        )
    names = [n.strip() for n in text.split(",")]
    if any(not n for n in names) or len(names) < 2:
        raise pytest.UsageError(
            f"--pipelines {text!r}: expected two or more layer names separated by commas, e.g. released,standardized"
        )
    if len(set(names)) != len(names):
        raise pytest.UsageError(f"--pipelines {text!r}: a layer is listed twice")
    bad = [n for n in names if not all(c.isalnum() or c in "_-" for c in n)]
    if bad:
        raise pytest.UsageError(f"--pipelines {text!r}: {bad[0]!r} is not a layer name (letters, digits, _ and -)")
    if vary:
        raise pytest.UsageError(
            "--vary with --pipelines: vary the fields of one layer at a time (--pipeline NAME "
            "--vary ...); --pipelines already runs each layer as a variant of the first"
        )
    return names


def default_cache_dir() -> Path:
    """Per-user cache directory for generations (``$XDG_CACHE_HOME/benchaudit``)."""
    import os

    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "benchaudit"


def get_options(config: pytest.Config) -> RunOptions:
    return config.stash[OPTIONS_KEY]


def item_runner(config: pytest.Config) -> ItemRunner:
    """The runner of this process; items never run where there is none (the xdist controller)."""
    runner = get_options(config).state.runner
    if runner is None:
        raise RuntimeError("a benchmark item ran in a process without a runner (the xdist controller)")
    return runner
