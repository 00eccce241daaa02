"""The scripted server's tokenizer: what its echoed prompts are cut into, and the tokenizer routes it serves.

lm-eval's API models read the endpoint's tokenizer when it serves vLLM's routes (lm-eval 0.4.13
``lm_eval/utils.py`` ``RemoteTokenizer``, ``check_remote_tokenizer_support``): ``GET
/tokenizer_info`` (its ``eos_token`` is appended to the stop sequences of a generation) and
``POST /tokenize`` / ``POST /detokenize`` (how log-likelihood requests are cut into context and
continuation).  A :class:`ScriptedTokenizer` given to the server answers those routes and cuts
the echo of a completion asked with ``echo: true``, so the echoed tokens and ``/tokenize`` agree,
as they do on a real server.

Tokens are the matches of ``pattern`` (by default whitespace joined to the word that follows it:
``"Answer: A"`` is ``"Answer:"``, ``" A"``); ``merges`` then fuses neighbours whose joined text is
listed (``merges=(": A",)`` with a pattern that splits punctuation makes ``": A"`` one token, a
tokenizer that merges the end of a context ``...Answer:`` with the continuation `` A``).  Ids are
handed out in order of first sight, ``eos`` first; decoding joins the tokens' texts (lossless).
Standard library only.
"""

from __future__ import annotations

import re
import threading
from typing import Any

__all__ = ["DEFAULT_PATTERN", "SPLIT_PUNCTUATION", "ScriptedTokenizer"]

DEFAULT_PATTERN = r"\s*\S+|\s+"  # whitespace joined to the word after it (the scripted echo's default)
SPLIT_PUNCTUATION = r"\s*\w+|\s*[^\s\w]|\s+"  # words and single punctuation marks, each with its leading space


class ScriptedTokenizer:
    """A lossless toy tokenizer with the routes of vLLM's tokenizer endpoints (see the module).

    ``eos``: the ``eos_token`` ``GET /tokenizer_info`` names (``None`` is sent as JSON null);
    ``pattern`` / ``merges``: how text is cut (see the module); ``serve_tokenize``: ``False`` answers
    ``POST /tokenize`` with 404 (``/tokenizer_info`` alone, which lm-eval does not take as a remote
    tokenizer); ``info``: extra ``/tokenizer_info`` keys.
    """

    def __init__(
        self,
        eos: str | None = "</s>",
        *,
        pattern: str = DEFAULT_PATTERN,
        merges: tuple[str, ...] = (),
        serve_tokenize: bool = True,
        info: dict[str, Any] | None = None,
    ) -> None:
        self.eos = eos
        self.pattern = re.compile(pattern)
        self.merges = frozenset(merges)
        self.serve_tokenize = serve_tokenize
        self.info = dict(info or {})
        self._lock = threading.Lock()
        self._ids: dict[str, int] = {}
        self._texts: list[str] = []
        if eos is not None:
            self._id(eos)

    def pieces(self, text: str) -> list[str]:
        """``text`` cut into tokens (their texts join back into ``text``)."""
        out: list[str] = []
        for piece in self.pattern.findall(text):
            if out and out[-1] + piece in self.merges:
                out[-1] += piece
            else:
                out.append(piece)
        return out

    def _id(self, piece: str) -> int:
        with self._lock:
            if piece not in self._ids:
                self._ids[piece] = len(self._texts)
                self._texts.append(piece)
            return self._ids[piece]

    def encode(self, text: str) -> list[int]:
        return [self._id(p) for p in self.pieces(text)]

    def decode(self, ids: list[int]) -> str:
        with self._lock:
            return "".join(self._texts[i] for i in ids)

    def answer(self, method: str, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
        """``(status, JSON body)`` for a tokenizer route, ``None`` for any other path."""
        if method == "GET" and path == "/tokenizer_info":
            return 200, {
                "tokenizer_class": "ScriptedTokenizer",
                "eos_token": self.eos,
                "bos_token": None,
                "pad_token": None,
                "model_max_length": 1 << 20,
                **self.info,
            }
        if method == "POST" and path == "/tokenize":
            if not self.serve_tokenize:
                return 404, {"error": {"message": "no route for POST /tokenize", "type": "not_found_error"}}
            prompt = body.get("prompt")
            if not isinstance(prompt, str):
                return 400, {"error": {"message": "prompt must be a string", "type": "invalid_request_error"}}
            tokens = self.encode(prompt)
            return 200, {"count": len(tokens), "max_model_len": 1 << 20, "tokens": tokens}
        if method == "POST" and path == "/detokenize":
            ids = body.get("tokens")
            if not isinstance(ids, list) or not all(isinstance(i, int) and 0 <= i < len(self._texts) for i in ids):
                return 400, {"error": {"message": "tokens must be known token ids", "type": "invalid_request_error"}}
            return 200, {"prompt": self.decode(ids)}
        return None
