"""A canary API key must appear nowhere the project writes or prints.

The key is sent as the bearer token to a ScriptedServer that echoes it back everywhere it
can: error messages (401, 500 cut at the error-length limit, a 429 without Retry-After,
an HTML 502 page), a 200 answer's content and reasoning, a malformed body, the served model
id; the HTTP stack raises exceptions whose message holds a URL carrying the key; a second
model has a password in its endpoint URL.  Then every output is searched: records, run.json,
summary.json, JUnit XML, terminal output (-rA, --tb=long, -l), the generation cache, the HTML
compare report, the Every Eval Ever export and a rescore.
"""

from __future__ import annotations

import base64
from pathlib import Path

import child_patches
import pytest

import pytest_benchaudit.common.secrets as secrets
from pytest_benchaudit.cli.app import main
from pytest_benchaudit.inference import openai_compat
from pytest_benchaudit.testing.runs import read_run
from pytest_benchaudit.testing.scripted_server import Call, Reply, ScriptedServer
from pytest_benchaudit.testing.toy import write_mcq_suite

CANARY = "sk-canary-9f3b2c7d1e8a4f6b0c5d2e7a9b1f3c8d"
URL_PASSWORD = "urlpass-5e1d7c9a3b2f4e6d8c0a"  # a secret that lives only in an endpoint URL
URL_BASIC = base64.b64encode(f"apikey:{URL_PASSWORD}".encode()).decode()  # what HTTP Basic auth sends for it
# Any 12 characters of the secret part give a key away, even when a cut kept only a prefix.
FRAGMENTS = [CANARY, CANARY[10:22], CANARY[-12:], URL_PASSWORD, URL_PASSWORD[8:20], URL_BASIC, URL_BASIC[4:16]]


MARKERS = [
    "PLAIN",
    "ECHO_401",
    "ECHO_500_LONG",
    "ECHO_429",
    "ECHO_HTML",
    "ECHO_ANSWER",
    "ECHO_WRONG",
    "ECHO_REASONING",
    "ECHO_MALFORMED",
    "RAISE_URL",
    "CONNECT_URL",
]


def script(call: Call) -> Reply:
    if call.headers.get("authorization", "").startswith("Basic "):  # the model with credentials in its URL
        return Reply(
            status=400, error_message=f"bad credentials: {call.headers['authorization']} (password {URL_PASSWORD})"
        )
    assert call.headers.get("authorization") == f"Bearer {CANARY}"
    text = call.last_user_text
    marker = text[text.index("[") + 1 : text.index("]")]
    if marker == "ECHO_401":
        return Reply(status=401, error_message=f"Incorrect API key provided: {CANARY}. Check your key.")
    if marker == "ECHO_500_LONG":  # the key straddles the cut of a long error text
        return Reply(status=500, error_message="x" * 490 + CANARY + " was rejected")
    if marker == "ECHO_429":  # no Retry-After; a plain-text body
        return Reply(status=429, raw_body=f"Too many requests for key {CANARY}".encode(), content_type="text/plain")
    if marker == "ECHO_HTML":
        return Reply(
            status=502,
            raw_body=f"<html><body>Bad gateway for {CANARY}</body></html>".encode(),
            content_type="text/html",
        )
    if marker == "ECHO_ANSWER":
        return Reply(content=f"The key you sent is {CANARY}.\nAnswer: B")
    if marker == "ECHO_WRONG":
        return Reply(content=f"{CANARY} Answer: C")
    if marker == "ECHO_REASONING":
        return Reply(content="Answer: B", reasoning_content=f"The header said Bearer {CANARY}; Answer: C")
    if marker == "ECHO_MALFORMED":
        return Reply(raw_body=f"upstream said: key {CANARY} invalid".encode())
    return Reply(content="Answer: B")


def write_suite(root: Path) -> None:
    write_mcq_suite(
        root,
        "leaky",
        [
            {
                "id": f"s{n:02d}",
                "question": f"Secret question [{marker}]?",
                "options": ["one", "two", "three", "four"],
                "gold": "B",
            }
            for n, marker in enumerate(MARKERS, 1)
        ],
        title="Secret-leak benchmark",
    )


def assert_clean(where: str, text: str | bytes) -> None:
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    for fragment in FRAGMENTS:
        assert fragment not in text, f"{fragment!r} leaked into {where}"


def assert_tree_clean(root: Path) -> int:
    files = [p for p in root.rglob("*") if p.is_file()]
    for path in files:
        assert_clean(str(path), path.read_bytes())
    return len(files)


@pytest.fixture(params=["inference process", "thread"])
def leaky_run(
    request: pytest.FixtureRequest, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> tuple[pytest.RunResult, Path]:
    """One run of every leaky marker, with the models asked from the inference process (the
    default: the client's patch is installed there) or from a thread of the pytest process."""
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    if request.param == "thread":
        monkeypatch.setenv("BENCHAUDIT_INFERENCE_PROCESS", "0")
        # Recorded first, so that the patch installed next is undone when the test ends.
        monkeypatch.setattr(openai_compat.OpenAICompatBackend, "_send", openai_compat.OpenAICompatBackend._send)
        child_patches.install_url_raising_send(CANARY)
    else:
        child_patches.in_children(
            monkeypatch, pytester.path.parent / "child-site", f"install_url_raising_send({CANARY!r})"
        )
    write_suite(pytester.path)
    with ScriptedServer(script, model_id=f"served-{CANARY}") as server:
        url_cred = server.url.replace("http://", f"http://apikey:{URL_PASSWORD}@")
        # Credentials in the URL beside $OPENAI_API_KEY cannot both be sent (one usage error): this
        # model's key variable is one that is unset, so its URL's credentials go as HTTP Basic auth.
        pytester.makepyprojecttoml(f"""
            [tool.benchaudit.models.cred]
            endpoint = "{url_cred}"
            api_key_env = "BENCHAUDIT_UNSET_KEY_VARIABLE"
            """)
        result = pytester.runpytest(
            "suites/leaky",
            "--data-dir",
            "data",
            "--report-dir",
            "out",
            "--cache-dir",
            "cache",
            "--model",
            f"m@{server.url}",
            "--model",
            "cred",
            "--max-retries",
            "1",
            "--request-timeout",
            "5",
            "-p",
            "no:randomly",
            "--junitxml",
            "junit.xml",
            "-rA",
            "--tb=long",
            "-l",
            "--log-level=DEBUG",
        )
        assert not server.script_errors, server.script_errors
        assert len(server.calls) >= len(MARKERS) - 2
    runs = [p for p in (pytester.path / "out").iterdir() if p.is_dir()]
    assert len(runs) == 1
    return result, runs[0]


def test_canary_key_appears_nowhere(
    leaky_run, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    result, run_dir = leaky_run
    out = read_run(run_dir)
    # The run itself: every item recorded, none crashed.
    outcomes = result.parseoutcomes()
    assert outcomes.get("errors", 0) == 0 and "INTERNALERROR" not in result.stdout.str()
    assert len(out["records"]) == 2 * len(MARKERS)
    recs = {(r["model"], r["question_id"]): r for r in out["records"]}
    by_marker = {MARKERS[int(qid[1:]) - 1]: r for (model, qid), r in recs.items() if model == "m"}
    # The key is masked, and what is around it is kept.
    assert by_marker["ECHO_401"]["error"] == "HTTP 401: Incorrect API key provided: ***. Check your key."
    assert by_marker["ECHO_ANSWER"]["raw_output"] == "The key you sent is ***.\nAnswer: B"
    assert by_marker["ECHO_ANSWER"]["correct"] and by_marker["ECHO_ANSWER"]["served_model"] == "served-***"
    assert by_marker["ECHO_REASONING"]["reasoning"] == "The header said Bearer ***; Answer: C"
    assert "Too many requests for key ***" in by_marker["ECHO_429"]["error"]
    assert "***" in by_marker["ECHO_500_LONG"]["error"] and "sk-canary" not in by_marker["ECHO_500_LONG"]["error"]
    assert "key=***" in by_marker["CONNECT_URL"]["error"]
    assert by_marker["RAISE_URL"]["invalid_reason"] == "inference_error"
    assert "InvalidURL" in by_marker["RAISE_URL"]["error"] and "key=***" in by_marker["RAISE_URL"]["error"]
    cred = [r for r in out["records"] if r["model"] == "cred"]
    assert cred and all(r["invalid_reason"] == "inference_error" for r in cred)
    # (the questions whose client is patched to raise a URL-quoting exception say that instead)
    assert "HTTP 400: bad credentials: Basic *** (password ***)" in {r["error"] for r in cred}
    # Written files of the run, JUnit XML, the generation cache (SQLite and its WAL).
    assert assert_tree_clean(run_dir) >= 3
    assert_clean("junit.xml", (pytester.path / "junit.xml").read_bytes())
    assert assert_tree_clean(pytester.path / "cache") >= 1
    # Terminal output, failure tracebacks included.
    assert "***" in result.stdout.str()
    assert_clean("stdout", result.stdout.str())
    assert_clean("stderr", result.stderr.str())

    # Offline commands read only what the run wrote: forget every registered secret first so
    # that they cannot mask a leak on their own.
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.setattr(secrets, "_values", set())
    compare_dir = pytester.path / "compare"
    assert (
        main(
            [
                "compare",
                str(run_dir),
                "--out",
                str(compare_dir),
                "--html",
                str(compare_dir / "r.html"),
                "--resamples",
                "50",
            ]
        )
        == 0
    )
    assert (compare_dir / "r.html").is_file()
    export_dir = pytester.path / "export"
    assert (
        main(
            [
                "export",
                str(run_dir),
                "--format",
                "every-eval-ever",
                "--samples",
                "--out",
                str(export_dir),
                "--suites-dir",
                str(pytester.path / "suites"),
            ]
        )
        == 0
    )
    rescored = pytester.path / "rescored"
    rescored.mkdir()
    assert (
        main(["rescore", str(run_dir), "--report-dir", str(rescored), "--suites-dir", str(pytester.path / "suites")])
        == 0
    )
    assert main(["show", str(run_dir)]) == 0
    for tree in (compare_dir, export_dir, rescored):
        assert assert_tree_clean(tree) >= 1, tree
    captured = capsys.readouterr()
    assert_clean("offline commands' stdout", captured.out)
    assert_clean("offline commands' stderr", captured.err)


def test_redact_masks_before_cutting_and_longest_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(secrets, "_values", set())
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)  # read when redacting, even if never registered
    assert secrets.redact(f"a {CANARY} b") == "a *** b"
    secrets.register_secret(CANARY[:20])  # a shorter secret inside the key: the key goes whole
    assert secrets.redact(f"[{CANARY}]") == "[***]"
    assert secrets.redact_obj({f"k{CANARY}": [CANARY, 1, None]}) == {"k***": ["***", 1, None]}
    secrets.register_secret("short")  # too short to be a key: never masks ordinary words
    assert secrets.redact("a short text") == "a short text"


def test_secret_values_cache_never_misses_a_change(monkeypatch: pytest.MonkeyPatch) -> None:
    """secret_values() sees every change of the secrets and the environment at the next call."""
    monkeypatch.setattr(secrets, "_values", set())
    monkeypatch.setattr(secrets, "_names", {"OPENAI_API_KEY"})
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("BENCHAUDIT_TEST_KEY_A", raising=False)
    assert secrets.secret_values() == frozenset()
    assert secrets.secret_values() == frozenset()  # filled
    monkeypatch.setenv("OPENAI_API_KEY", "sk-set-after-the-cache-was-filled")
    assert secrets.secret_values() == {"sk-set-after-the-cache-was-filled"}
    monkeypatch.setenv("OPENAI_API_KEY", "sk-changed-to-another-value-0001")
    assert secrets.secret_values() == {"sk-changed-to-another-value-0001"}
    secrets.register_secret_env(["BENCHAUDIT_TEST_KEY_A"])  # a name registered while unset ...
    assert secrets.secret_values() == {"sk-changed-to-another-value-0001"}
    monkeypatch.setenv("BENCHAUDIT_TEST_KEY_A", "sk-second-name-value-0002")  # ... then set
    assert secrets.secret_values() == {"sk-changed-to-another-value-0001", "sk-second-name-value-0002"}
    secrets.register_secret("sk-registered-value-0003")
    assert "sk-registered-value-0003" in secrets.secret_values()
    monkeypatch.delenv("OPENAI_API_KEY")
    assert secrets.secret_values() == {"sk-second-name-value-0002", "sk-registered-value-0003"}
    monkeypatch.setattr(secrets, "_values", {"sk-swapped-values-set-0004"})  # as other tests do
    assert secrets.secret_values() == {"sk-second-name-value-0002", "sk-swapped-values-set-0004"}
    monkeypatch.setattr(secrets.os, "environ", {"BENCHAUDIT_TEST_KEY_A": "sk-plain-dict-environ-05"})
    assert secrets.secret_values() == {"sk-plain-dict-environ-05", "sk-swapped-values-set-0004"}


QUERY_KEY = "qk-4d7e1a9c3f5b2e8d6a0c"  # a key some providers take as a query parameter


def test_a_key_in_the_url_query_is_sent_with_each_request_and_written_nowhere(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `--model m@http://127.0.0.1:P/v1?api-version=2024-06-01&api_key=K`: the endpoint path is joined
    # before the query (/v1/chat/completions?...), the query goes with every request, and K is in no
    # file the run writes (run.json's argv and endpoint, records, cache, JUnit) nor in its output.
    from pytest_benchaudit.testing.provider_fakes import FakeCall, FakeReply, ProviderFake

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # the key is in the URL only
    monkeypatch.setattr(secrets, "_values", set())

    def needs_the_query_key(call: FakeCall) -> FakeReply | None:
        if call.query != {"api-version": "2024-06-01", "api_key": QUERY_KEY}:
            return FakeReply(status=401, error={"error": {"message": f"bad query {call.query}", "code": "x"}})
        return None

    write_mcq_suite(
        pytester.path,
        "plain",
        [
            {"id": f"p{n}", "question": f"Plain question {n}?", "options": ["one", "two", "three", "four"], "gold": "A"}
            for n in range(1, 4)
        ],
    )
    with ProviderFake("openai", key="", script=needs_the_query_key) as fake:
        base = f"{fake.root}/v1"
        url = f"{base}?api-version=2024-06-01&api_key={QUERY_KEY}"
        result = pytester.runpytest(
            "suites/plain",
            "--data-dir",
            "data",
            "--report-dir",
            "out",
            "--cache-dir",
            "cache",
            "--model",
            f"m@{url}",
            "-p",
            "no:randomly",
            "--junitxml",
            "junit.xml",
            "-rA",
            "--log-level=DEBUG",
        )
        paths = [c.path for c in fake.calls if c.path.endswith("completions")]
    assert paths == ["/v1/chat/completions"] * 3
    result.assert_outcomes(passed=3)
    run_dir = next(p for p in (pytester.path / "out").iterdir() if p.is_dir())
    run = read_run(run_dir)["run"]
    (model,) = run["models"]
    assert model["endpoint"] == f"{base}?api-version=2024-06-01&api_key=***"
    assert f"m@{base}?api-version=2024-06-01&api_key=***" in run["argv"]
    for where in (run_dir, pytester.path / "cache"):
        for path in where.rglob("*"):
            if path.is_file():
                assert QUERY_KEY not in path.read_bytes().decode("utf-8", "replace"), path
    assert QUERY_KEY not in (pytester.path / "junit.xml").read_text()
    assert QUERY_KEY not in result.stdout.str() + result.stderr.str()


@pytest.mark.parametrize(
    ("url", "written"),
    [
        ("https://u:pw-0123456789@h/v1", "https://h/v1"),
        ("https://h/v1?api_key=K123&x=1", "https://h/v1?api_key=***&x=1"),
        (
            "https://h/v1?key=K&access_token=T&X-Amz-Signature=S&api-version=2024",
            "https://h/v1?key=***&access_token=***&X-Amz-Signature=***&api-version=2024",
        ),
        ("https://h/v1?flag&api_key=", "https://h/v1?flag&api_key="),  # nothing to hide
        ("https://h/v1?q=a%20b#frag", "https://h/v1?q=a%20b#frag"),  # the rest kept as written
    ],
)
def test_strip_url_credentials(url: str, written: str) -> None:
    assert secrets.strip_url_credentials(url) == written
    assert secrets.strip_url_credentials_in(f"--model m@{url} --x") == f"--model m@{written} --x"


def test_url_secrets_are_registered_as_written_and_decoded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(secrets, "_values", set())
    secrets.register_url_secrets("https://u:p%40ss-0123456789@h/v1?api_key=k%2Bey-0123456789&api-version=2024-06-01")
    assert secrets.secret_values() >= {"p%40ss-0123456789", "p@ss-0123456789", "k%2Bey-0123456789", "k+ey-0123456789"}
    assert "2024-06-01" not in secrets.secret_values()


SHORT_USER, SHORT_PASSWORD = "alice", "pass"  # the issue's `user:pass@`: shorter than any key


def test_short_url_credentials_echoed_by_an_error_are_written_nowhere(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`m@http://alice:pass@host/v1` is sent as HTTP Basic auth; a server whose error body echoes the
    Authorization header and the password (a 401 stops the model: the resume command is printed).
    Before, the header's token and the password were in records, JUnit and the terminal (a value
    under 8 characters was never masked, the Basic token never known), and the resume command
    dropped the credentials.  Now: `Basic ***`, `password=***` in every output, the password masked
    as a word only (an answer's words are never touched), the resume command showing `***@`."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setattr(secrets, "_short", set())
    basic = base64.b64encode(f"{SHORT_USER}:{SHORT_PASSWORD}".encode()).decode()

    def echo(call: Call) -> Reply:
        return Reply(
            status=401,
            error_message=f"no: {call.headers.get('authorization')}; user={SHORT_USER} password={SHORT_PASSWORD}",
        )

    write_mcq_suite(
        pytester.path,
        "plain",
        [
            {"id": f"p{n}", "question": f"Plain question {n}?", "options": ["one", "two", "three", "four"], "gold": "A"}
            for n in range(1, 21)
        ],
    )
    with ScriptedServer(echo) as server:
        url = server.url.replace("http://", f"http://{SHORT_USER}:{SHORT_PASSWORD}@")
        result = pytester.runpytest(
            "suites/plain",
            "--data-dir",
            "data",
            "--report-dir",
            "out",
            "--model",
            f"m@{url}",
            "-p",
            "no:randomly",
            "--junitxml",
            "junit.xml",
            "-rA",
            "--max-retries",
            "0",
            "--concurrency",
            "1",
        )
        sent = {c.headers.get("authorization") for c in server.calls if c.path.endswith("completions")}
        port = server.url.split(":")[2].split("/")[0]
    assert sent == {f"Basic {basic}"}  # the credentials went, as HTTP Basic auth
    run_dir = next(p for p in (pytester.path / "out").iterdir() if p.is_dir())
    out = read_run(run_dir)
    errors = {r["error"] for r in out["records"] if r["error"] and not r["error"].startswith("endpoint_down")}
    assert errors == {f"HTTP 401: no: Basic ***; user={SHORT_USER} password=***"}
    texts = {
        "stdout": result.stdout.str(),
        "stderr": result.stderr.str(),
        "junit.xml": (pytester.path / "junit.xml").read_text(),
    }
    texts.update({str(p): p.read_text() for p in run_dir.iterdir() if p.is_file()})
    for where, text in texts.items():
        assert basic not in text and f"{SHORT_USER}:{SHORT_PASSWORD}@" not in text, where
        assert f"password={SHORT_PASSWORD}" not in text, where
    resume = [line for line in texts["stdout"].splitlines() if "--resume" in line and line.startswith("  pytest")]
    assert resume and f"'m@http://***@127.0.0.1:{port}/v1'" in resume[0]
    assert resume[0].endswith("# *** stands for a secret that was masked: put it back")
    # A model answer's words are never masked: "pass" is a short credential, not a key.
    assert secrets.redact("I pass on this one") == "I pass on this one"
    assert secrets.redact_error("password pass passed") == "password *** passed"


@pytest.mark.parametrize(
    ("model", "says"),
    [
        ("m@http://127.0.0.1:99999/v1", "not a URL a request can be sent to (Port out of range 0-65535)"),
        ("m@http://127.0.0.1:8o80/v1", "not a URL a request can be sent to (Invalid URL: port can't be converted"),
        ("m@http://[::1/v1", "not a URL a request can be sent to"),
        (
            "m@http://alice:pass@127.0.0.1:9/v1",
            "the URL holds credentials (sent as HTTP Basic auth) and "
            "$OPENAI_API_KEY is set (sent as the Authorization header)",
        ),
    ],
)
def test_a_request_that_cannot_be_built_is_one_usage_error_before_any_question(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, model: str, says: str
) -> None:
    """Before, each of these was the model's inference_error, recorded for every question; the
    credentials were never in the message (masked `***@`)."""
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    write_mcq_suite(
        pytester.path, "plain", [{"id": "p1", "question": "Plain question?", "options": ["one", "two"], "gold": "A"}]
    )
    result = pytester.runpytest("suites/plain", "--data-dir", "data", "--report-dir", "out", "--model", model)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert f"ERROR: --model {secrets.mask_url_credentials_in(model)}: {says}" in err, err
    assert ":pass@" not in err and not (pytester.path / "out").exists()


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:{port}/v1",
        "http://u:p@127.0.0.1:{port}/v1",
        "http://127.0.0.1:99999/v1",
        "http://127.0.0.1:x1/v1",
        "http://[::1/v1",
        "http:///v1",
        "http://u:p\u00e9\u4e2d@127.0.0.1:{port}/v1",
    ],
)
@pytest.mark.parametrize("key", [None, "sk-some-key-0123456789"])
def test_the_endpoint_check_agrees_with_aiohttp_building_the_request(
    url: str, key: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The start-up check is aiohttp's own verdict: the client is asked for real (against a scripted
    server on 127.0.0.1); what the check refuses, aiohttp fails to send, and what it accepts is answered."""
    import asyncio

    from pytest_benchaudit.inference.backend import endpoint_problem, parse_model_spec
    from pytest_benchaudit.pipeline.types import Message, Request

    if key is None:
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    else:
        monkeypatch.setenv("OPENAI_API_KEY", key)
    with ScriptedServer(lambda call: Reply(content="Answer: A")) as server:
        spec = parse_model_spec(f"m@{url.format(port=server.url.split(':')[2].split('/')[0])}")
        problem = endpoint_problem(spec)

        async def ask() -> str | None:
            try:
                backend = openai_compat.OpenAICompatBackend(spec.model_copy(update={"max_retries": 0}), concurrency=1)
            except ValueError as err:  # the client cannot even be made for it (urlsplit refuses the URL)
                return str(err)
            try:
                answer = await backend.generate(Request(mode="chat", messages=[Message(role="user", content="q")]))
            finally:
                await backend.aclose()
            return answer.error

        error = asyncio.run(ask())
    assert (problem is None) == (error is None), (problem, error)
