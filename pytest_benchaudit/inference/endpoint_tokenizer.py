"""The endpoint's tokenizer as lm-eval finds it: its end-of-sequence token, and whether lm-eval would use it.

lm-evaluation-harness 0.4.13's ``local-completions`` model (``lm_eval/models/openai_completions.py``,
``tokenizer_backend="auto"``) asks the endpoint, before any request, whether it serves vLLM's
tokenizer routes (``lm_eval/utils.py`` ``check_remote_tokenizer_support``): ``GET
{root}/tokenizer_info`` must answer a JSON object with an ``eos_token`` key, and ``POST
{root}/tokenize`` with ``{"prompt": "test", "add_special_tokens": false}`` a list of ``tokens``;
``{root}`` is its ``base_url`` without ``/v1/completions`` (the server's root, not ``/v1``).  When
both answer it uses that *remote* tokenizer: a generation's stop sequences are the task's
``until`` plus ``tokenizer_info["eos_token"]`` when it is not null and not listed already
(``lm_eval/models/utils.py`` ``handle_stop_sequences``, passed ``eos`` by ``TemplateAPI.model_call``),
and log-likelihood requests are cut into context and continuation by ``/tokenize``.  Otherwise it
loads the Hugging Face tokenizer named by the model (``tokenizer_backend="huggingface"``), whose EOS
the endpoint cannot tell: this module says so instead of guessing.  ``local-chat-completions``
(``tokenizer_backend=None``) asks nothing and appends nothing, and neither does ``local-completions``
with ``num_concurrent`` above 1 (``TemplateAPI.amodel_call`` passes no ``eos``).

:func:`probe` makes lm-eval's two requests (synchronously, once per endpoint: the pytest side renders
requests with the answer); :func:`with_eos` appends the EOS to a request's ``stop`` as lm-eval does,
saying in ``adjustments`` where it came from or why none was appended.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from pydantic import JsonValue

from pytest_benchaudit.common.secrets import redact, strip_url_credentials
from pytest_benchaudit.inference.backend import ModelSpec, auth_headers
from pytest_benchaudit.pipeline.types import Request

__all__ = ["EndpointTokenizer", "NOT_ASKED", "of_model", "probe", "tokenizer_root", "with_eos"]

_TIMEOUT = 5.0  # lm-eval's check_remote_tokenizer_support waits 5 s per request
_HF_FALLBACK = (
    "lm-eval then loads the Hugging Face tokenizer the model name names, whose end-of-sequence token "
    "the endpoint cannot tell"
)


@dataclass(frozen=True)
class EndpointTokenizer:
    """What lm-eval would find at an endpoint: ``served`` (it would use the endpoint's tokenizer),
    ``eos`` (its ``eos_token``; ``None`` when null or not served), ``source`` (the request that said
    so, or why the EOS cannot be known here; no URL, as it goes into each request's ``adjustments``)
    and ``root`` (where it was asked, credentials removed; ``""`` when nothing was asked)."""

    served: bool
    eos: str | None
    source: str
    root: str = ""

    @property
    def appended(self) -> bool:
        return self.served and self.eos is not None

    def card(self) -> dict[str, JsonValue]:
        """What a pipeline card says of it (``card["providers"][model]["end_of_sequence"]``)."""
        return {"token": self.eos, "known": self.served, "source": self.source, "asked": self.root or None}

    @classmethod
    def from_card(cls, entry: Mapping[str, JsonValue]) -> EndpointTokenizer:
        """The finding a card recorded (:meth:`card`), as it was (a replay sends what the run sent)."""
        eos, asked = entry.get("token"), entry.get("asked")
        return cls(
            bool(entry.get("known")),
            eos if isinstance(eos, str) else None,
            str(entry.get("source", "")),
            asked if isinstance(asked, str) else "",
        )


NOT_ASKED = EndpointTokenizer(False, None, "not asked")


def tokenizer_root(base_url: str) -> str:
    """lm-eval's server root for an endpoint whose base URL is ``base_url`` (``http://host:8000/v1``):
    the completions URL lm-eval is given with ``/v1/completions`` removed (``http://host:8000``)."""
    parts = urlsplit(base_url)
    full = parts._replace(path=parts.path.rstrip("/") + "/completions", query="", fragment="").geturl()
    return full.replace("/v1/completions", "").replace("/v1/chat/completions", "").rstrip("/")


def _ask(url: str, headers: Mapping[str, str], body: dict[str, Any] | None) -> tuple[Any, str]:
    """One request: ``(JSON answer, "")`` or ``(None, what went wrong)``."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url,
        data=data,
        method="GET" if body is None else "POST",
        headers={"Content-Type": "application/json", **headers},
    )
    try:
        with urllib.request.urlopen(request, timeout=_TIMEOUT) as answer:  # noqa: S310 - the model's own endpoint
            return json.loads(answer.read()), ""
    except urllib.error.HTTPError as err:
        return None, f"HTTP {err.code}"
    except (urllib.error.URLError, OSError) as err:
        return None, f"{type(err).__name__}: {getattr(err, 'reason', err)}"
    except ValueError:
        return None, "an answer that is not JSON"


_probed: dict[tuple[str, tuple[tuple[str, str], ...]], EndpointTokenizer] = {}
_lock = threading.Lock()


def probe(base_url: str, headers: Mapping[str, str] | None = None) -> EndpointTokenizer:
    """Whether the endpoint at ``base_url`` serves the tokenizer lm-eval would use, and its EOS
    (lm-eval's ``check_remote_tokenizer_support`` then ``RemoteTokenizer.eos_token``).  Asked once
    per endpoint and process; ``headers`` (the model's key) go to the endpoint only."""
    root = tokenizer_root(base_url)
    key = (root, tuple(sorted((headers or {}).items())))
    with _lock:
        if key in _probed:
            return _probed[key]
    shown = strip_url_credentials(root)
    info, failed = _ask(f"{root}/tokenizer_info", headers or {}, None)
    if failed or not isinstance(info, dict) or "eos_token" not in info:
        found = EndpointTokenizer(
            False, None, f"GET /tokenizer_info: {failed or 'no eos_token in the answer'}; {_HF_FALLBACK}", shown
        )
    else:
        tokens, failed = _ask(f"{root}/tokenize", headers or {}, {"prompt": "test", "add_special_tokens": False})
        if failed or not isinstance(tokens, dict) or not isinstance(tokens.get("tokens"), list):
            found = EndpointTokenizer(
                False,
                None,
                f"POST /tokenize: {failed or 'no list of tokens'} (GET /tokenizer_info answers); {_HF_FALLBACK}",
                shown,
            )
        else:
            eos = info["eos_token"]
            found = EndpointTokenizer(
                True, eos if isinstance(eos, str) else None, redact(f"GET /tokenizer_info: eos_token {eos!r}"), shown
            )
    with _lock:
        return _probed.setdefault(key, found)


def _auth(spec: ModelSpec) -> dict[str, str]:
    """The model's key in its auth header (as its client sends it), for its own endpoint only."""
    return {**dict(spec.headers), **auth_headers(spec, spec.api_key())}


def of_model(spec: ModelSpec) -> EndpointTokenizer:
    """:func:`probe` of a model's endpoint (the first of a balanced set); a model the run launches
    is not asked (its server is not up when its requests are rendered: llama.cpp's serves no
    tokenizer routes, vLLM's only with ``--enable-tokenizer-info-endpoint``)."""
    if spec.kind in ("local", "vllm"):
        return EndpointTokenizer(False, None, f"a {spec.kind} server this run launches is not asked; {_HF_FALLBACK}")
    if spec.kind != "endpoint" or not spec.base_url:
        return EndpointTokenizer(False, None, f"no endpoint to ask ({spec.kind} model)")
    return probe(spec.base_url, _auth(spec))


def with_eos(request: Request, found: EndpointTokenizer) -> Request:
    """``request`` with the endpoint's EOS appended to its ``stop`` as lm-eval appends it (when known,
    not null and not listed already), ``adjustments`` saying where it came from or why none was."""
    stop = request.params.get("stop")
    stops = [stop] if isinstance(stop, str) else list(stop or [])
    if found.appended and found.eos not in stops:
        note = f"inference.stop: the endpoint's end-of-sequence token {found.eos!r} appended ({found.source})"
        params = {**request.params, "stop": [*stops, found.eos]}
    elif found.appended:
        note = f"inference.stop: the endpoint's end-of-sequence token {found.eos!r} is listed already ({found.source})"
        params = dict(request.params)
    else:
        note = f"inference.stop: no end-of-sequence token appended ({found.source})"
        params = dict(request.params)
    fields = {name: getattr(request, name) for name in type(request).model_fields}
    # Built anew, not copied: a copy would keep a cached ``identity`` of the request as it was.
    return Request(**{**fields, "params": params, "adjustments": (*request.adjustments, note)})
