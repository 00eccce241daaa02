"""The endpoint's tokenizer as lm-eval finds it: where it asks, what it takes, the EOS it appends.

Checked against the scripted server's tokenizer routes, and, where lm-eval is installed
(``$BENCHAUDIT_PEER_PYTHON``), against lm-eval's own ``check_remote_tokenizer_support`` and
``RemoteTokenizer.eos_token`` run on the same endpoints.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from pytest_benchaudit.inference import endpoint_tokenizer
from pytest_benchaudit.inference.backend import ModelSpec
from pytest_benchaudit.inference.endpoint_tokenizer import EndpointTokenizer, of_model, probe, tokenizer_root, with_eos
from pytest_benchaudit.pipeline.types import Request
from pytest_benchaudit.testing.peer_python import find_peer_python
from pytest_benchaudit.testing.scripted_server import ScriptedServer
from pytest_benchaudit.testing.scripted_tokenizer import ScriptedTokenizer


@pytest.fixture(autouse=True)
def _fresh_probes() -> None:
    endpoint_tokenizer._probed.clear()  # each test's servers are new (ports may be reused)


@pytest.mark.parametrize(
    ("base_url", "root"),
    [
        ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000"),
        ("http://127.0.0.1:8000/v1/", "http://127.0.0.1:8000"),
        ("https://host/serve/v1?api-version=1", "https://host/serve"),
        ("http://host:9/api", "http://host:9/api/completions"),  # lm-eval removes only "/v1/completions"
    ],
)
def test_the_root_is_lm_evals_base_url_without_v1_completions(base_url: str, root: str) -> None:
    assert tokenizer_root(base_url) == root


def _server(tokenizer: ScriptedTokenizer | None) -> ScriptedServer:
    return ScriptedServer(tokenizer=tokenizer).start()


CASES = {  # endpoint -> (served, eos): what lm-eval's auto backend would find
    "qwen": (ScriptedTokenizer(eos="<|im_end|>"), True, "<|im_end|>"),
    "null-eos": (ScriptedTokenizer(eos=None), True, None),
    "no-tokenize": (ScriptedTokenizer(eos="</s>", serve_tokenize=False), False, None),
    "no-tokenizer": (None, False, None),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_probe_takes_the_tokenizer_lm_eval_would_take(case: str) -> None:
    tokenizer, served, eos = CASES[case]
    server = _server(tokenizer)
    url = server.url
    try:
        found = probe(url)
        asked = [(c.path, c.body) for c in server.calls]
    finally:
        server.stop()
    assert (found.served, found.eos) == (served, eos)
    assert asked[0] == ("/tokenizer_info", {})
    if tokenizer is not None:  # the second request is lm-eval's test tokenization
        assert asked[1] == ("/tokenize", {"prompt": "test", "add_special_tokens": False})
    assert found.root == url.removesuffix("/v1") and url.removesuffix("/v1") not in found.source  # no URL sent on
    if not served:
        assert "Hugging Face tokenizer" in found.source


def test_the_probe_is_asked_once_per_endpoint() -> None:
    server = _server(ScriptedTokenizer(eos="<|im_end|>"))
    try:
        assert probe(server.url) == probe(server.url + "/")
        assert len(server.calls) == 2
    finally:
        server.stop()


def test_a_model_the_run_launches_or_replays_is_not_asked() -> None:
    assert not of_model(ModelSpec(label="local", kind="local")).served
    assert "launches" in of_model(ModelSpec(label="v", kind="vllm", model_id="x")).source


def _request(stop: list[str] | None) -> Request:
    return Request(mode="completion", prompt="p", params={"max_tokens": 5, **({"stop": stop} if stop else {})})


def test_the_eos_is_appended_as_lm_evals_handle_stop_sequences_appends_it() -> None:
    found = EndpointTokenizer(True, "<|im_end|>", "GET /tokenizer_info: eos_token '<|im_end|>'", "http://h")
    sent = with_eos(_request(["</s>", "\n"]), found)
    assert sent.params["stop"] == ["</s>", "\n", "<|im_end|>"]
    assert sent.adjustments == (
        "inference.stop: the endpoint's end-of-sequence token '<|im_end|>' appended "
        "(GET /tokenizer_info: eos_token '<|im_end|>')",
    )
    assert with_eos(_request(None), found).params["stop"] == ["<|im_end|>"]  # until None -> [eos]
    # Listed already: lm-eval appends nothing (no duplicate), and the note says so.
    listed = with_eos(
        _request(["</s>", "\n"]), EndpointTokenizer(True, "</s>", "GET /tokenizer_info: eos_token '</s>'")
    )
    assert listed.params["stop"] == ["</s>", "\n"] and "listed already" in listed.adjustments[0]
    # Unknown or null: nothing appended, and why.
    for unknown in (
        EndpointTokenizer(False, None, "GET /tokenizer_info: HTTP 404; ..."),
        EndpointTokenizer(True, None, "GET /tokenizer_info: eos_token None"),
    ):
        kept = with_eos(_request(["</s>", "\n"]), unknown)
        assert kept.params["stop"] == ["</s>", "\n"] and kept.adjustments[0].startswith("inference.stop: no end-of")
    # A new request, not a copy keeping the old identity.
    assert with_eos(_request(["</s>"]), found).identity != _request(["</s>"]).identity


def test_the_card_entry_reads_back_as_it_was() -> None:
    found = EndpointTokenizer(True, "<|im_end|>", "GET /tokenizer_info: eos_token '<|im_end|>'", "http://h:1")
    assert EndpointTokenizer.from_card(json.loads(json.dumps(found.card()))) == found


LM_EVAL_PROBE = """
import json, sys
from lm_eval.utils import RemoteTokenizer, check_remote_tokenizer_support
out = []
for url in sys.argv[1:]:
    served = check_remote_tokenizer_support(url + "/completions", max_retries=1)
    out.append({"served": served, "eos": RemoteTokenizer(url + "/completions", 5).eos_token if served else None})
print(json.dumps(out))
"""


def test_the_probe_finds_what_lm_evals_own_code_finds() -> None:
    """Live: lm-eval's check_remote_tokenizer_support and RemoteTokenizer.eos_token on the same endpoints."""
    python, why = find_peer_python("lm_eval")
    if python is None:
        pytest.skip(why)
    servers = {case: _server(tokenizer) for case, (tokenizer, _, _) in CASES.items()}
    try:
        done = subprocess.run(
            [python, "-c", LM_EVAL_PROBE, *(s.url for s in servers.values())],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        lm_eval = json.loads(done.stdout.strip().splitlines()[-1])
        ours = [probe(s.url) for s in servers.values()]
    finally:
        for server in servers.values():
            server.stop()
    assert [(f.served, f.eos) for f in ours] == [(r["served"], r["eos"]) for r in lm_eval]
    assert [r["served"] for r in lm_eval] == [True, True, False, False]  # the cases cover both answers
