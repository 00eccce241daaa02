"""Tests for pytest_benchaudit.dataset.suites: the four shipped suite configs (layers validated, released
layers checked against the facts sheet of the benchmarks' released code), question loading from
the real data (``BENCHAUDIT_DATA``; skipped when unset), data-directory resolution, and every
malformed-config / malformed-data path on small files written to tmp_path."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from pytest_benchaudit.dataset.readers import DATA_ENV, file_checksum, load_questions, resolve_data_dir
from pytest_benchaudit.dataset.suites import Suite, SuiteError, load_suite
from pytest_benchaudit.pipeline.stages import LAYERS, UNSPECIFIED, Pipeline, PipelineError

SUITES_DIR = Path(__file__).resolve().parents[2] / "suites"
SUITE_NAMES = ("seceval", "mmlu_cs", "cybermetric", "cti_bench")
TASKS = [
    ("seceval", "mcq"),
    ("mmlu_cs", "mcq"),
    ("cybermetric", "cm80"),
    ("cybermetric", "cm500"),
    ("cybermetric", "cm2000"),
    ("cti_bench", "mcq"),
]


def suite(name: str) -> Suite:
    return load_suite(SUITES_DIR / name / "suite.toml")


def real_questions(data_dir: Path, name: str, task: str, *, few_shot: bool = False):
    s = suite(name)
    spec = s.tasks[task]
    filename = (spec.few_shot or {}).get("file") if few_shot else spec.data["file"]
    if not (data_dir / s.data_folder / filename).is_file():
        pytest.skip(f"real benchmark data file missing: {s.data_folder}/{filename} under ${DATA_ENV}")
    return load_questions(s, task, data_dir, f"${DATA_ENV}", few_shot=few_shot)


# =========================================================================== shipped suite configs


@pytest.mark.parametrize("name", SUITE_NAMES)
def test_suite_config_loads(name):
    s = suite(name)
    assert s.name == name
    assert s.path == SUITES_DIR / name / "suite.toml"
    assert s.tasks, "a suite has at least one task"
    assert s.info.get("source", "").startswith("https://github.com/")
    assert s.info.get("revision")
    # the shared standardized templates come in through `extends`
    assert "standard_mcq" in s.templates and "standard_mcq_multi" in s.templates


def test_suite_tasks_and_data_folders():
    assert {n: sorted(suite(n).tasks) for n in SUITE_NAMES} == {
        "seceval": ["mcq"],
        "mmlu_cs": ["mcq"],
        "cybermetric": ["cm2000", "cm500", "cm80"],
        "cti_bench": ["ate", "mcq", "rcm", "rcm_2021", "taa", "vsp"],
    }
    assert {n: suite(n).data_folder for n in SUITE_NAMES} == {
        "seceval": "seceval",
        "mmlu_cs": "mmlu-computer-security",
        "cybermetric": "cybermetric",
        "cti_bench": "cti-bench",
    }


@pytest.mark.parametrize(("name", "task"), TASKS)
def test_every_layer_of_every_task_validates(name, task):
    s = suite(name)
    layers = s.layer_names(task)
    assert set(LAYERS) <= set(layers), f"{name}.{task} lacks one of {LAYERS}: {layers}"
    for layer in layers:
        pipe = s.pipeline(task, layer)
        assert isinstance(pipe, Pipeline)
        assert (pipe.name, pipe.benchmark, pipe.task) == (layer, name, task)
        tpl = pipe.prompt.template
        assert tpl == UNSPECIFIED or tpl in s.templates
        # the dataset stage is filled from [benchmark] and the task's data files
        assert pipe.dataset.source == s.info["source"]
        assert pipe.dataset.files[0] == s.tasks[task].data["file"]
        # every field named in `why` is a real stage field
        fields = pipe.card()["fields"]
        for key in pipe.why:
            assert key in fields, f"{name}.{task} layer {layer!r}: why names unknown field {key!r}"


@pytest.mark.parametrize(("name", "task"), TASKS)
def test_released_and_standardized_layers_are_fully_specified_downstream(name, task):
    s = suite(name)
    std = s.pipeline(task, "standardized")
    assert std.unspecified_fields() == []
    assert std.card()["unspecified"] == []
    released = s.pipeline(task, "released")
    # CyberMetric and CTI-Bench release no cross-file / cross-task aggregation
    expected = ["aggregation.method"] if name in ("cybermetric", "cti_bench") else []
    assert released.unspecified_fields() == expected


def test_unknown_layer_raises_pipeline_error_listing_available():
    with pytest.raises(PipelineError) as exc:
        suite("seceval").pipeline("mcq", "nonexistent")
    msg = str(exc.value)
    assert "seceval.mcq has no pipeline 'nonexistent'" in msg
    for layer in ("documented", "released", "standardized", "released_base"):
        assert layer in msg


# --------------------------------------------------------------------------- released layers vs facts sheet


def fields_of(name: str, task: str, layer: str) -> dict:
    return suite(name).pipeline(task, layer).card()["fields"]


def test_cti_mcq_released_matches_facts():
    f = fields_of("cti_bench", "mcq", "released")
    assert f["prompt.template"] == "released"
    assert f["prompt.format.mode"] == "chat"
    assert f["prompt.format.system_role"] == "system"
    assert f["prompt.format.few_shot"] == 0
    assert f["inference.decoding.temperature"] == 0
    assert f["inference.decoding.top_p"] == 1
    assert f["inference.decoding.seed"] == 42
    assert f["inference.max_tokens"] == 2048
    assert f["inference.stop"] == []  # "Stop sequences: none"
    assert f["extraction.rule"] == "last_line_letter"
    assert f["extraction.reasoning"] == "keep"
    assert f["scoring.metric"] == "exact_match"
    assert f["scoring.denominator"] == "valid"  # only rows with a valid answer are counted
    tpl = suite("cti_bench").templates["released"]
    assert tpl.system and "cybersecurity expert" in tpl.system and "threat intelligence" in tpl.system
    assert tpl.user == "{prompt}"  # the Prompt column, as is


@pytest.mark.parametrize("task", ["mcq", "rcm", "rcm_2021", "vsp", "ate", "taa"])
def test_cti_released_provider_paths_follow_the_notebook(task):
    """get_single_prediction has a branch per provider: GPT (system role, seed 42), Gemini
    (system glued, no seed), Replicate (glued, seed 42) and Gemma on Replicate (temperature 0.01)."""
    gpt = fields_of("cti_bench", task, "released")
    paths = {
        layer: fields_of("cti_bench", task, layer)
        for layer in ("released_gemini", "released_replicate", "released_gemma")
    }
    changed = {layer: {k for k in gpt if f[k] != gpt[k]} for layer, f in paths.items()}
    assert changed == {
        "released_gemini": {"prompt.format.system_role", "inference.decoding.seed"},
        "released_replicate": {"prompt.format.system_role"},
        "released_gemma": {"prompt.format.system_role", "inference.decoding.temperature"},
    }
    assert gpt["prompt.format.system_role"] == "system" and gpt["inference.decoding.seed"] == 42
    assert paths["released_gemini"]["inference.decoding.seed"] == UNSPECIFIED
    assert paths["released_gemini"]["prompt.format.system_role"] == "prepend_user"
    assert paths["released_gemma"]["inference.decoding.temperature"] == 0.01
    pipe = suite("cti_bench").pipeline(task, "released_gemini")
    assert "no seed" in pipe.why["inference.decoding.seed"]
    # the base layer's notes and reasons come along
    assert pipe.why["extraction.rule"] == suite("cti_bench").pipeline(task, "released").why["extraction.rule"]
    # every task leaves the cross-task aggregation open: the notebook reports each task alone
    assert gpt["aggregation.method"] == UNSPECIFIED


def test_cti_gemini_path_sends_no_seed(data_dir):
    from pytest_benchaudit.prompt.templates import render_request

    s = suite("cti_bench")
    qs, _ = real_questions(data_dir, "cti_bench", "mcq")
    p = s.pipeline("mcq", "released_gemini")
    req = render_request(p, s.templates[p.prompt.template], qs[0])
    assert req.params == {"temperature": 0.0, "top_p": 1.0, "max_tokens": 2048}
    assert [m.role for m in req.messages] == ["user"]
    assert req.messages[0].content == s.templates["released"].system + " " + qs[0].prompt


def test_layer_base_must_name_another_layer(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "suite.toml").write_text(
        '[tasks.t]\ndata = { file = "x.json", question = "q", gold = "a" }\n[tasks.t.released]\n'
        'prompt.template = "unspecified"\n[tasks.t.released_other]\nbase = "nope"\n'
    )
    with pytest.raises(SuiteError, match=r"t layer 'released_other': base 'nope' must name another layer"):
        load_suite(tmp_path / "b" / "suite.toml")


def test_every_released_layer_field_has_a_why():
    missing = []
    for path in sorted(SUITES_DIR.glob("*/suite.toml")):
        s = load_suite(path)
        for task, spec in s.tasks.items():
            for layer, raw in spec.layers.items():
                if not layer.startswith("released"):
                    continue
                fields = _leaf_paths({k: v for k, v in raw.items() if k not in ("why", "notes", "base")})
                why = s.pipeline(task, layer).why
                missing += [f"{s.name}.{task}:{layer}:{f}" for f in fields if not why.get(f, "").strip()]
    assert missing == []


def test_mmlu_released_matches_facts():
    f = fields_of("mmlu_cs", "mcq", "released")
    assert f["dataset.split"] == "test"
    assert f["prompt.format.mode"] == "completion"
    assert f["prompt.format.system_role"] == "none"
    assert f["prompt.format.few_shot"] == 5
    assert f["inference.decoding.temperature"] == 0
    assert f["inference.max_tokens"] == 1
    assert f["inference.decoding.top_logprobs"] == 100
    assert f["inference.stop"] == []
    assert f["extraction.rule"] == "mmlu_logprob_argmax"  # bare-except quirk: no log-probabilities reads A
    assert f["scoring.denominator"] == "total"
    assert f["aggregation.method"] == "micro"  # questions pooled
    assert f["dataset.files"] == ["computer_security_test.csv", "computer_security_dev.csv"]
    tpl = suite("mmlu_cs").templates["released"]
    assert tpl.header == "The following are multiple choice questions (with answers) about  computer security.\n\n"


@pytest.mark.parametrize("task", ["cm80", "cm500", "cm2000"])
def test_cybermetric_released_matches_facts(task):
    f = fields_of("cybermetric", task, "released")
    assert f["prompt.format.mode"] == "chat"
    assert f["prompt.format.system_role"] == "system"
    assert f["extraction.rule"] == "answer_regex"
    assert f["scoring.metric"] == "exact_match"
    assert f["scoring.denominator"] == "total"
    # decoding and budget are not set in the released code
    for key in (
        "inference.decoding.temperature",
        "inference.decoding.top_p",
        "inference.decoding.seed",
        "inference.max_tokens",
    ):
        assert f[key] == UNSPECIFIED, key
    assert f["inference.stop"] == []
    assert f["aggregation.method"] == UNSPECIFIED  # no cross-file aggregation
    assert suite("cybermetric").templates["released"].system == "You are a security expert who answers questions."


def test_seceval_released_matches_facts():
    f = fields_of("seceval", "mcq", "released")
    assert f["prompt.template"] == "released_chat"
    assert f["prompt.format.mode"] == "chat"
    assert f["prompt.format.system_role"] == "system"
    assert f["extraction.rule"] == "all_capital_letters"
    assert f["scoring.metric"] == "letter_set_exact"
    assert f["scoring.denominator"] == "total"
    assert f["aggregation.method"] == "micro"
    assert f["aggregation.by"] == "topics"
    assert f["inference.max_tokens"] == UNSPECIFIED
    # AzureChatOpenAI without a temperature sends LangChain's ChatOpenAI default, 0.7
    assert f["inference.decoding.temperature"] == 0.7
    assert "0.7" in suite("seceval").pipeline("mcq", "released").why["inference.decoding.temperature"]
    assert f["inference.stop"] == []
    shots = suite("seceval").templates["released_chat"].fixed_shots
    assert [(sh.user, sh.assistant) for sh in shots] == [
        (
            "Question: Which mitigation prevent stack overflow bug? A: Stack Canary. B: ALSR. C: CFI. D: Code Signing.",
            "Answer: ABC",
        )
    ]


def test_seceval_released_base_matches_facts():
    f = fields_of("seceval", "mcq", "released_base")
    assert f["prompt.template"] == "released_base"
    assert f["prompt.format.mode"] == "completion"
    assert f["inference.max_tokens"] == 5  # HF max_new_tokens = 5
    assert f["extraction.rule"] == "all_capital_letters"
    assert f["scoring.metric"] == "letter_set_exact"
    assert f["scoring.denominator"] == "total"
    header = suite("seceval").templates["released_base"].header
    # fixed 5-shot block with answers ABC, ABCD, ABCD, ABD, ABCD
    assert re.findall(r"\nAnswer: ([A-D]+) ?\n", header) == ["ABC", "ABCD", "ABCD", "ABD", "ABCD"]


def test_released_layers_cite_their_source():
    for name, task in TASKS:
        pipe = suite(name).pipeline(task, "released")
        assert "prompt.template" in pipe.why, f"{name}.{task}"
        assert "extraction.rule" in pipe.why, f"{name}.{task}"
        assert "scoring.denominator" in pipe.why, f"{name}.{task}"


# --------------------------------------------------------------------------- standardized layer


SHARED_STANDARDIZED_FIELDS = [
    "prompt.template",
    "prompt.format.mode",
    "prompt.format.system_role",
    "prompt.format.few_shot",
    "inference.decoding.temperature",
    "inference.decoding.top_p",
    "inference.decoding.seed",
    "inference.max_tokens",
    "inference.stop",
    "extraction.rule",
    "extraction.reasoning",
    "scoring.metric",
    "scoring.denominator",
    "aggregation.method",
]


@pytest.mark.parametrize(("name", "task"), TASKS)
def test_standardized_layer_has_a_why_for_each_shared_field(name, task):
    pipe = suite(name).pipeline(task, "standardized")
    for path in SHARED_STANDARDIZED_FIELDS:
        assert pipe.why.get(path, "").strip(), f"{name}.{task} standardized: no why for {path}"


def _leaf_paths(table: dict, prefix: str = "") -> list[str]:
    out = []
    for key, value in table.items():
        if isinstance(value, dict):
            out += _leaf_paths(value, f"{prefix}{key}.")
        else:
            out.append(f"{prefix}{key}")
    return out


@pytest.mark.parametrize(
    ("name", "task"),
    [
        ("seceval", "mcq"),
        ("mmlu_cs", "mcq"),
        ("cybermetric", "cm80"),
        ("cti_bench", "mcq"),
    ],
)
def test_standardized_layer_has_a_why_for_every_field_it_sets(name, task):
    s = suite(name)
    raw = {k: v for k, v in s.tasks[task].layers["standardized"].items() if k not in ("why", "notes")}
    why = s.pipeline(task, "standardized").why
    missing = [p for p in _leaf_paths(raw) if not why.get(p, "").strip()]
    assert missing == []


def test_standardized_layer_is_the_same_across_benchmarks_except_task_choices():
    # the fields a benchmark does not deliberately change are identical in every suite
    same = [
        "prompt.format.mode",
        "prompt.format.system_role",
        "prompt.format.few_shot",
        "inference.decoding.temperature",
        "inference.decoding.top_p",
        "inference.decoding.seed",
        "inference.max_tokens",
        "inference.stop",
        "extraction.reasoning",
        "scoring.denominator",
    ]
    cards = {(n, t): fields_of(n, t, "standardized") for n, t in TASKS}
    for path in same:
        values = {key: card[path] for key, card in cards.items()}
        assert len({json.dumps(v) for v in values.values()}) == 1, (path, values)
    ref = cards[("cti_bench", "mcq")]
    assert ref["inference.decoding.temperature"] == 0 and ref["inference.max_tokens"] == 2048
    assert ref["scoring.denominator"] == "total" and ref["extraction.reasoning"] == "strip"
    # task-specific choices
    assert cards[("seceval", "mcq")]["prompt.template"] == "standard_mcq_multi"
    assert cards[("seceval", "mcq")]["extraction.rule"] == "final_answer_letters"
    assert cards[("cybermetric", "cm80")]["aggregation.method"] == "macro"
    assert cards[("cti_bench", "mcq")]["prompt.template"] == "standard_mcq"


# =========================================================================== real data


@pytest.mark.parametrize(
    ("name", "task", "count"),
    [
        ("seceval", "mcq", 2189),
        ("mmlu_cs", "mcq", 100),
        ("cybermetric", "cm80", 80),
        ("cybermetric", "cm500", 500),
        ("cybermetric", "cm2000", 2000),
        ("cti_bench", "mcq", 2500),
    ],
)
def test_real_question_counts(data_dir, name, task, count):
    questions, path = real_questions(data_dir, name, task)
    assert len(questions) == count
    assert path.name == suite(name).tasks[task].data["file"]
    assert [q.index for q in questions] == list(range(count))
    assert len({q.id for q in questions}) == count
    assert all(q.benchmark == name and q.task == task for q in questions)


def test_real_mmlu_few_shot_dev(data_dir):
    shots, path = real_questions(data_dir, "mmlu_cs", "mcq", few_shot=True)
    assert path.name == "computer_security_dev.csv"
    assert len(shots) == 5
    assert shots[0].text == "SHA-1 has a message digest of"
    assert shots[0].choices == {"A": "160 bits", "B": "512 bits", "C": "628 bits", "D": "820 bits"}
    assert [s.gold for s in shots] == ["A", "D", "B", "C", "D"]


def test_real_mmlu_test_rows(data_dir):
    questions, _ = real_questions(data_dir, "mmlu_cs", "mcq")
    assert all(list(q.choices) == ["A", "B", "C", "D"] for q in questions)
    assert {q.gold for q in questions} <= set("ABCD")
    # no header row: ids are synthetic row numbers
    assert questions[0].id == "0001" and questions[-1].id == "0100"


def test_real_seceval_choices_stripped_of_prefixes(data_dir):
    questions, path = real_questions(data_dir, "seceval", "mcq")
    raw = json.loads(path.read_text(encoding="utf-8"))
    assert len(raw) == len(questions)
    for q, row in zip(questions, raw):
        assert q.id == row["id"]
        assert q.text == row["question"]
        labels = list(q.choices)
        assert labels == ["A", "B", "C", "D"][: len(labels)]
        for lab, text, stored in zip(labels, q.choices.values(), row["choices"]):
            assert stored == f"{lab}: {text}"
            assert not text.startswith(f"{lab}: ")
        assert q.gold == row["answer"]
        assert q.meta["topics"] == row.get("topics")
    first = questions[0]
    assert first.choices["A"].startswith("The storage must contain the original identifiers")


def test_real_seceval_gold_quirks_kept(data_dir):
    questions, _ = real_questions(data_dir, "seceval", "mcq")
    golds = [q.gold for q in questions]
    assert golds.count("") == 7  # 7 empty gold answers, kept as stored
    assert golds.count("AA") == 2


def test_real_cti_mcq_gold_lowercase_b_kept(data_dir):
    questions, _ = real_questions(data_dir, "cti_bench", "mcq")
    odd = [q for q in questions if q.gold not in ("A", "B", "C", "D")]
    assert [q.gold for q in odd] == ["b"]
    assert all(q.prompt and q.prompt.startswith("You are given a multiple-choice question") for q in questions)
    assert list(questions[0].choices) == ["A", "B", "C", "D"]
    assert questions[0].choices["B"] == "Execution Prevention"
    assert questions[0].meta["URL"] == "https://attack.mitre.org/techniques/T1548/"


def test_real_cybermetric_choices_and_gold(data_dir):
    questions, _ = real_questions(data_dir, "cybermetric", "cm80")
    assert all(list(q.choices) == ["A", "B", "C", "D"] for q in questions)
    assert {q.gold for q in questions} <= set("ABCD")
    assert questions[0].text.startswith("What is the primary requirement for an Random Bit Generator")


def test_real_data_checksum_is_sha256_and_stable(data_dir):
    _, path = real_questions(data_dir, "cybermetric", "cm80")
    assert file_checksum(path) == hashlib.sha256(path.read_bytes()).hexdigest()
    assert file_checksum(path) == file_checksum(path)


# =========================================================================== resolve_data_dir


def test_resolve_data_dir_option_wins(monkeypatch, tmp_path):
    monkeypatch.setenv(DATA_ENV, str(tmp_path / "env"))
    assert resolve_data_dir(str(tmp_path / "opt")) == (tmp_path / "opt", "--data-dir")


def test_resolve_data_dir_env(monkeypatch, tmp_path):
    monkeypatch.setenv(DATA_ENV, str(tmp_path / "env"))
    assert resolve_data_dir(None) == (tmp_path / "env", f"${DATA_ENV}")


def test_resolve_data_dir_expands_user(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert resolve_data_dir("~/d")[0] == tmp_path / "d"


def test_resolve_data_dir_cache_fallback(monkeypatch, tmp_path):
    monkeypatch.delenv(DATA_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    path, origin = resolve_data_dir(None)
    assert path == tmp_path / "cache" / "benchaudit" / "datasets"
    assert origin == "the per-user cache directory"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert resolve_data_dir(None)[0] == tmp_path / "home" / ".cache" / "benchaudit" / "datasets"


# =========================================================================== malformed configs / data (tmp_path)


class Mini:
    """A tiny suite in tmp_path: suites/mini/suite.toml and data/minidata/<files>."""

    def __init__(self, root: Path):
        self.root = root
        self.suite_path = root / "suites" / "mini" / "suite.toml"
        self.suite_path.parent.mkdir(parents=True)
        self.data_dir = root / "data"
        (self.data_dir / "minidata").mkdir(parents=True)

    def config(self, data: str, extra: str = "") -> Suite:
        self.suite_path.write_text(
            '[benchmark]\nname = "mini"\ndata_folder = "minidata"\n\n[tasks.t.data]\n' + data + "\n" + extra,
            encoding="utf-8",
        )
        return load_suite(self.suite_path)

    def write(self, name: str, content: str) -> Path:
        path = self.data_dir / "minidata" / name
        path.write_text(content, encoding="utf-8")
        return path

    def load(self, s: Suite, **kw):
        return load_questions(s, "t", self.data_dir, "test-origin", **kw)


@pytest.fixture
def mini(tmp_path) -> Mini:
    return Mini(tmp_path)


JSONL = 'file = "q.jsonl"\nquestion = "q"\nchoices = "c"\ngold = "a"'
TSV = 'file = "q.tsv"\nquestion = "Q"\nchoices = ["A", "B"]\ngold = "GT"'


def jl(*rows) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def test_mini_suite_loads_good_data(mini):
    s = mini.config(JSONL)
    mini.write(
        "q.jsonl",
        jl({"q": "x?", "c": ["one", "two"], "a": "B"}, {"q": "y?", "c": {"A": "p", "B": "q"}, "a": ["A", "B"]}),
    )
    questions, path = mini.load(s)
    assert path == (mini.data_dir / "minidata" / "q.jsonl").resolve()
    assert [(q.id, q.text, q.choices, q.gold) for q in questions] == [
        ("0001", "x?", {"A": "one", "B": "two"}, "B"),
        ("0002", "y?", {"A": "p", "B": "q"}, "AB"),
    ]
    # a layer-less suite has no pipelines
    assert s.layer_names("t") == []


def test_missing_data_file_names_full_path_and_benchmark_folder(mini):
    s = mini.config(JSONL)
    with pytest.raises(SuiteError) as exc:
        mini.load(s)
    msg = str(exc.value)
    full = (mini.data_dir / "minidata" / "q.jsonl").resolve()
    assert f"data file not found: {full}" in msg
    assert "'minidata/' folder" in msg
    assert "test-origin" in msg  # which setting chose the data directory
    assert DATA_ENV in msg


def test_missing_data_folder_entirely(mini):
    s = mini.config(JSONL)
    with pytest.raises(SuiteError, match="data not found: no 'minidata/' folder in .*elsewhere"):
        load_questions(s, "t", mini.root / "elsewhere", "test-origin")


def test_bad_json_line_in_jsonl_names_file_and_line(mini):
    s = mini.config(JSONL)
    path = mini.write("q.jsonl", jl({"q": "x", "c": ["a"], "a": "A"}) + "\n" + '{"q": "y", "c": [}\n')
    with pytest.raises(SuiteError) as exc:
        mini.load(s)
    msg = str(exc.value)
    assert msg.startswith(f"{path.resolve()}: line 3: invalid JSON")


def test_jsonl_blank_lines_skipped_and_line_numbers_physical(mini):
    s = mini.config(JSONL)
    mini.write("q.jsonl", "\n" + jl({"q": "x", "c": ["a"], "a": "A"}) + "\n" + '{"q": "y", "c": ["a"]}\n')
    with pytest.raises(SuiteError, match=r"line 4: missing field 'a'"):
        mini.load(s)


def test_jsonl_string_with_unicode_line_separator(mini):
    # U+2028 is legal inside a JSON string (json.dumps(ensure_ascii=False) writes it raw);
    # JSON Lines splits on '\n' only.
    s = mini.config(JSONL)
    mini.write("q.jsonl", jl({"q": "first\u2028second", "c": ["a", "b"], "a": "A"}))
    questions, _ = mini.load(s)
    assert questions[0].text == "first\u2028second"


def test_invalid_json_file_names_line_and_column(mini):
    s = mini.config('file = "q.json"\nquestion = "q"\ngold = "a"')
    path = mini.write("q.json", '[\n  {"q": "x", "a": "A"},\n  {"q": "y" "a": "B"}\n]\n')
    with pytest.raises(SuiteError) as exc:
        mini.load(s)
    assert str(exc.value).startswith(f"{path.resolve()}: invalid JSON at line 3 column")


def test_json_records_key_missing(mini):
    s = mini.config('file = "q.json"\nrecords = "questions"\nquestion = "q"\ngold = "a"')
    mini.write("q.json", '[{"q": "x", "a": "A"}]')
    with pytest.raises(SuiteError, match=r"expected a JSON object with a 'questions' list"):
        mini.load(s)


def test_json_not_an_array(mini):
    s = mini.config('file = "q.json"\nquestion = "q"\ngold = "a"')
    mini.write("q.json", '{"q": "x", "a": "A"}')
    with pytest.raises(SuiteError, match=r"expected a JSON array of records"):
        mini.load(s)


def test_missing_field_names_file_row_and_field(mini):
    s = mini.config(JSONL)
    path = mini.write("q.jsonl", jl({"q": "x", "c": ["a"], "a": "A"}, {"q": "y", "c": ["a"]}))
    with pytest.raises(SuiteError) as exc:
        mini.load(s)
    assert str(exc.value) == f"{path.resolve()}: line 2: missing field 'a'"


def test_missing_column_in_json_record_names_record(mini):
    s = mini.config(
        'file = "q.json"\nrecords = "questions"\nquestion = "question"\nchoices = "answers"\ngold = "solution"'
    )
    path = mini.write("q.json", json.dumps({"questions": [{"question": "x", "answers": {"A": "a"}}]}))
    with pytest.raises(SuiteError) as exc:
        mini.load(s)
    assert str(exc.value) == f"{path.resolve()}: record 1: missing field 'solution'"


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ({"q": "x", "c": "A: a B: b", "a": "A"}, "field 'c' should be list or dict, found str"),
        ({"q": 5, "c": ["a"], "a": "A"}, "field 'q' should be str, found int"),
        ({"q": "x", "c": ["a", 2], "a": "A"}, "option 2 of 'c' is not a string"),
        ({"q": "x", "c": ["a"], "a": {"x": 1}}, "field 'a' should be str or int or list, found dict"),
        ({"q": "x", "c": ["a"], "a": None}, "field 'a' should be str or int or list, found NoneType"),
    ],
)
def test_wrong_type_names_file_row_field_and_types(mini, row, expected):
    s = mini.config(JSONL)
    path = mini.write("q.jsonl", jl({"q": "ok", "c": ["a"], "a": "A"}, row))
    with pytest.raises(SuiteError) as exc:
        mini.load(s)
    assert str(exc.value) == f"{path.resolve()}: line 2: {expected}"


def test_row_not_an_object(mini):
    s = mini.config(JSONL)
    mini.write("q.jsonl", "[1, 2]\n")
    with pytest.raises(SuiteError, match=r"line 1: expected an object, found list"):
        mini.load(s)


def test_prefixed_choices_must_carry_their_label(mini):
    s = mini.config(JSONL + "\nchoices_prefixed = true")
    mini.write("q.jsonl", jl({"q": "x", "c": ["A: yes", "C: no"], "a": "A"}))
    with pytest.raises(SuiteError, match=r"line 1: option 2 should start with 'B: '"):
        mini.load(s)


def test_prefixed_choices_are_stripped(mini):
    s = mini.config(JSONL + "\nchoices_prefixed = true")
    mini.write("q.jsonl", jl({"q": "x", "c": ["A: yes: really", "B: no"], "a": "A"}))
    questions, _ = mini.load(s)
    assert questions[0].choices == {"A": "yes: really", "B": "no"}


def test_tsv_wrong_number_of_columns(mini):
    s = mini.config(TSV)
    path = mini.write("q.tsv", "Q\tA\tB\tGT\nx\ty\tz\tA\nx2\ty\tA\n")
    with pytest.raises(SuiteError) as exc:
        mini.load(s)
    assert str(exc.value) == f"{path.resolve()}: row 3: expected 4 columns (Q, A, B, GT), found 3"


def test_tsv_header_only_has_no_questions(mini):
    s = mini.config(TSV)
    path = mini.write("q.tsv", "Q\tA\tB\tGT\n")
    with pytest.raises(SuiteError) as exc:
        mini.load(s)
    assert str(exc.value) == f"{path.resolve()}: no questions found"


def test_tsv_column_named_in_config_missing_from_header(mini):
    s = mini.config(TSV)
    path = mini.write("q.tsv", "Q\tA\tB\tAnswer\nx\ty\tz\tA\n")
    with pytest.raises(SuiteError) as exc:
        mini.load(s)
    assert str(exc.value) == f"{path.resolve()}: row 2: missing field 'GT'"


def test_csv_with_columns_and_quoted_newline(mini):
    s = mini.config(
        'file = "q.csv"\ncolumns = ["Q", "A", "B", "GT"]\nquestion = "Q"\nchoices = ["A", "B"]\ngold = "GT"'
    )
    mini.write("q.csv", '"two\nlines",y,z,B\nw,"a, b",c,A\n')
    questions, _ = mini.load(s)
    assert [(q.text, q.choices, q.gold) for q in questions] == [
        ("two\nlines", {"A": "y", "B": "z"}, "B"),
        ("w", {"A": "a, b", "B": "c"}, "A"),
    ]


def test_tsv_field_with_unicode_line_separator(mini):
    s = mini.config(TSV)
    mini.write("q.tsv", "Q\tA\tB\tGT\nfirst\u2028second\ty\tz\tA\n")
    questions, _ = mini.load(s)
    assert questions[0].text == "first\u2028second"


@pytest.mark.parametrize(("name", "content"), [("q.jsonl", ""), ("q.jsonl", "\n \n"), ("q.tsv", "")])
def test_empty_file(mini, name, content):
    s = mini.config(JSONL if name.endswith("jsonl") else TSV)
    path = mini.write(name, content)
    with pytest.raises(SuiteError) as exc:
        mini.load(s)
    assert str(exc.value) == f"{path.resolve()}: file is empty"


def test_empty_json_list_has_no_questions(mini):
    s = mini.config('file = "q.json"\nquestion = "q"\ngold = "a"')
    mini.write("q.json", "[]")
    with pytest.raises(SuiteError, match="no questions found"):
        mini.load(s)


def test_duplicate_ids(mini):
    s = mini.config(JSONL + '\nid = "id"')
    path = mini.write("q.jsonl", jl(*[{"id": i, "q": "x", "c": ["a"], "a": "A"} for i in ("a1", "b2", "a1")]))
    with pytest.raises(SuiteError) as exc:
        mini.load(s)
    assert str(exc.value) == f"{path.resolve()}: line 3: duplicate question id 'a1' (first at line 1)"


def test_integer_ids_become_strings(mini):
    s = mini.config(JSONL + '\nid = "id"')
    mini.write("q.jsonl", jl({"id": 7, "q": "x", "c": ["a"], "a": "A"}))
    questions, _ = mini.load(s)
    assert questions[0].id == "7"


@pytest.mark.parametrize("filename", ["../../etc/passwd", "../other/q.jsonl", "/etc/passwd"])
def test_data_file_escaping_data_directory(mini, filename):
    s = mini.config(f'file = "{filename}"\nquestion = "q"\ngold = "a"')
    other = mini.data_dir / "other"
    other.mkdir()
    (other / "q.jsonl").write_text(jl({"q": "x", "a": "A"}))  # exists, but outside minidata/
    with pytest.raises(SuiteError) as exc:
        mini.load(s)
    msg = str(exc.value)
    assert repr(filename) in msg
    assert "points outside the data directory" in msg


def test_data_file_symlink_escaping_data_directory(mini):
    outside = mini.root / "secret.jsonl"
    outside.write_text(jl({"q": "x", "c": ["a"], "a": "A"}))
    (mini.data_dir / "minidata" / "q.jsonl").symlink_to(outside)
    s = mini.config(JSONL)
    with pytest.raises(SuiteError, match="points outside the data directory"):
        mini.load(s)


def test_unknown_data_format(mini):
    s = mini.config('file = "q.txt"\nquestion = "q"\ngold = "a"')
    path = mini.write("q.txt", "hello")
    with pytest.raises(SuiteError) as exc:
        mini.load(s)
    assert str(exc.value) == f"{path.resolve()}: unknown data format 'txt' (json, jsonl, csv, tsv)"


def test_non_utf8_file(mini):
    s = mini.config(JSONL)
    path = mini.data_dir / "minidata" / "q.jsonl"
    path.write_bytes(b'{"q": "caf\xe9", "c": ["a"], "a": "A"}\n')
    with pytest.raises(SuiteError, match=r"not UTF-8 text"):
        mini.load(s)


def test_few_shot_file_from_task_config(mini):
    s = mini.config(JSONL, '[tasks.t.few_shot]\nfile = "dev.jsonl"\n')
    mini.write("q.jsonl", jl({"q": "x", "c": ["a"], "a": "A"}))
    mini.write("dev.jsonl", jl({"q": "d1", "c": ["a"], "a": "A"}, {"q": "d2", "c": ["a"], "a": "A"}))
    shots, path = mini.load(s, few_shot=True)
    assert path.name == "dev.jsonl"
    assert [q.text for q in shots] == ["d1", "d2"]


# --------------------------------------------------------------------------- malformed suite.toml


def test_invalid_toml(mini):
    mini.suite_path.write_text('[benchmark\nname = "mini"\n')
    with pytest.raises(SuiteError) as exc:
        load_suite(mini.suite_path)
    assert str(exc.value).startswith(f"{mini.suite_path}: not valid TOML:")


def test_suite_config_not_found(tmp_path):
    path = tmp_path / "nope" / "suite.toml"
    with pytest.raises(SuiteError, match="suite config not found") as exc:
        load_suite(path)
    assert str(path) in str(exc.value)


def test_unknown_prompt_template_in_layer(mini):
    with pytest.raises(SuiteError) as exc:
        mini.config(JSONL, '[templates.mine]\nuser = "{question}"\n[tasks.t.released]\nprompt.template = "nope"\n')
    msg = str(exc.value)
    assert msg.startswith(str(mini.suite_path))
    assert "mini.t layer 'released': unknown prompt.template 'nope'" in msg
    assert "templates: mine" in msg


@pytest.mark.parametrize("placeholder", ["{bogus}", "{question.__class__}", "{question!r}", "{question:>10}", "{0}"])
def test_unknown_placeholder_in_template(mini, placeholder):
    with pytest.raises(SuiteError) as exc:
        mini.config(JSONL, f'[templates.mine]\nuser = "Q: {placeholder}"\n')
    msg = str(exc.value)
    assert f"template 'mine': unknown placeholder {placeholder}" in msg
    assert "allowed: answer, labels, options, prompt, question" in msg


def test_unknown_template_key(mini):
    with pytest.raises(SuiteError, match=r"(?s)template 'mine':.*usr.*Extra inputs are not permitted"):
        mini.config(JSONL, '[templates.mine]\nusr = "{question}"\n')


@pytest.mark.parametrize(
    ("layer_toml", "expected"),
    [
        ("inference.max_tokens = 0", "mini.t layer 'released': inference.max_tokens"),
        ("inference.max_token = 5", "mini.t layer 'released': inference.max_token"),
        ('scoring.denominator = "some"', "mini.t layer 'released': scoring.denominator"),
    ],
)
def test_invalid_layer_field_fails_at_load(mini, layer_toml, expected):
    with pytest.raises(SuiteError) as exc:
        mini.config(JSONL, f"[tasks.t.released]\n{layer_toml}\n")
    assert str(exc.value).startswith(f"{mini.suite_path}: {expected}")


def test_task_without_data_file(mini):
    mini.suite_path.write_text('[tasks.t]\ntitle = "x"\n')
    with pytest.raises(SuiteError, match=r"\[tasks.t.data\]: missing key 'file'"):
        load_suite(mini.suite_path)


def test_suite_without_tasks(mini):
    mini.suite_path.write_text('[benchmark]\nname = "mini"\n')
    with pytest.raises(SuiteError, match=r"no \[tasks\.\*\] defined"):
        load_suite(mini.suite_path)


def test_name_defaults_to_folder_and_data_folder_to_name(mini):
    mini.suite_path.write_text('[tasks.t.data]\nfile = "q.jsonl"\nquestion = "q"\ngold = "a"\n')
    s = load_suite(mini.suite_path)
    assert s.name == "mini" and s.data_folder == "mini" and s.title == "mini"


# --------------------------------------------------------------------------- extends


def test_extends_merges_base_layers_and_templates(mini):
    (mini.root / "suites" / "base.toml").write_text(
        '[templates.std]\nuser = "{question}"\n'
        '[layers.standardized]\nprompt.template = "std"\ninference.max_tokens = 7\nscoring.denominator = "total"\n'
        '[layers.standardized.why]\n"inference.max_tokens" = "seven"\n'
    )
    mini.suite_path.write_text(
        'extends = "../base.toml"\n[benchmark]\nname = "mini"\ndata_folder = "minidata"\n'
        '[tasks.t.data]\nfile = "q.jsonl"\nquestion = "q"\ngold = "a"\n'
        '[tasks.t.standardized]\ninference.max_tokens = 9\n[tasks.t.standardized.why]\n"scoring.denominator" = "all"\n'
        '[tasks.u.data]\nfile = "u.jsonl"\nquestion = "q"\ngold = "a"\n'
        '[tasks.u.released_custom]\nscoring.metric = "m"\n'
    )
    s = load_suite(mini.suite_path)
    assert "std" in s.templates
    t = s.pipeline("t", "standardized")
    assert t.prompt.template == "std"
    assert t.inference.max_tokens == 9  # task value wins over the shared layer
    assert t.scoring.denominator == "total"
    assert t.why == {"inference.max_tokens": "seven", "scoring.denominator": "all"}  # why tables merge
    u = s.pipeline("u", "standardized")
    assert u.inference.max_tokens == 7
    # a named variant of a layer (released_*) in a task becomes a layer of that task only
    assert s.layer_names("u") == ["standardized", "released_custom"]
    assert s.layer_names("t") == ["standardized"]
    # the custom layer does not inherit the shared standardized fields
    assert s.pipeline("u", "released_custom").inference.max_tokens == UNSPECIFIED
    assert s.pipeline("u", "released_custom").scoring.metric == "m"


def test_extends_outside_suites_directory_rejected(mini):
    mini.suite_path.write_text('extends = "../../../outside.toml"\n[tasks.t.data]\nfile = "q.jsonl"\n')
    (mini.root.parent / "outside.toml").write_text("")
    with pytest.raises(SuiteError) as exc:
        load_suite(mini.suite_path)
    assert "'extends' must name a file inside the suites directory" in str(exc.value)


def test_extends_missing_base(mini):
    mini.suite_path.write_text('extends = "../missing.toml"\n[tasks.t.data]\nfile = "q.jsonl"\n')
    with pytest.raises(SuiteError, match=r"missing\.toml: suite config not found"):
        load_suite(mini.suite_path)


def test_extends_invalid_base(mini):
    (mini.root / "suites" / "base.toml").write_text("[layers\n")
    mini.suite_path.write_text('extends = "../base.toml"\n[tasks.t.data]\nfile = "q.jsonl"\n')
    with pytest.raises(SuiteError, match=r"base\.toml: not valid TOML"):
        load_suite(mini.suite_path)


def test_resources_from_own_and_other_benchmark_folders(tmp_path):
    from pytest_benchaudit.dataset.readers import load_resources

    (tmp_path / "suites" / "b").mkdir(parents=True)
    (tmp_path / "data" / "b").mkdir(parents=True)
    (tmp_path / "data" / "other" / "lookups").mkdir(parents=True)
    (tmp_path / "data" / "b" / "q.jsonl").write_text('{"q": "x", "gold": "A"}\n')
    (tmp_path / "data" / "b" / "own.json").write_text('{"a": ["b"]}')
    (tmp_path / "data" / "other" / "lookups" / "aliases.json").write_text('{"x": ["y"]}')
    cfg = tmp_path / "suites" / "b" / "suite.toml"
    cfg.write_text(
        '[benchmark]\nname = "b"\n[tasks.t]\ndata = { file = "q.jsonl", format = "jsonl", question = "q", gold = "gold" }\n'
        'resources = { own = "own.json", shared = { folder = "other", file = "lookups/aliases.json" } }\n'
    )
    suite = load_suite(cfg)
    data, paths = load_resources(suite, "t", tmp_path / "data", "test")
    assert data == {"own": {"a": ["b"]}, "shared": {"x": ["y"]}}
    assert paths["shared"].name == "aliases.json"
    cfg.write_text(cfg.read_text().replace('folder = "other"', 'folder = "../.."'))
    with pytest.raises(SuiteError, match="outside the data directory"):
        load_resources(load_suite(cfg), "t", tmp_path / "data", "test")


def test_json_data_reads_as_json_reads_it() -> None:
    import json
    import math

    from pytest_benchaudit.dataset.formats import _json

    assert _json('[{"id": 1, "q": "ünïcode"}]') == [{"id": 1, "q": "ünïcode"}]
    assert math.isnan(_json('{"x": NaN}')["x"]) and _json('{"n": 36893488147419103232}')["n"] == 2**65
    with pytest.raises(json.JSONDecodeError) as err:
        _json('[{"id": 1,}\n]')
    assert (err.value.lineno, err.value.colno) == (1, 11)  # json's wording, for the SuiteError
