"""The model's tokenizer as the server has it (``--tokenizer server``).

When no local copy of the model's tokenizer is at hand, exact-length prompts are built
through the server's own tokenize and detokenize endpoints. :class:`ServerTokenizer`
meets :class:`~tokenmark.tokenizer.VocabularyTokenizer`, so synthetic prompts are made
exactly as with a local tokenizer (:func:`~tokenmark.tokenizer.exact_text`): drawn word
ids are turned into text locally when the words' texts carry their leading space (byte-
level BPE; each word's text was asked once, else the server detokenizes them), and the
text is tokenized by the server: one round trip per prompt, re-tried with trimmed ids in
the rare case the server splits the text differently.

Shapes supported (the first that answers is used; all are ``POST`` with JSON):

==================  ==============================  =========================================
server              tokenize                        detokenize
==================  ==============================  =========================================
vLLM                ``/tokenize`` ``{model, prompt,  ``/detokenize`` ``{model, tokens}`` ->
                    add_special_tokens}`` ->         ``{prompt}``
                    ``{tokens, count, ...}``
SGLang              ``/v1/tokenize`` (same body) ->  ``/v1/detokenize`` -> ``{text}``
                    ``{tokens, count, ...}``
llama.cpp server    ``/tokenize`` ``{content,        ``/detokenize`` ``{tokens}`` ->
                    add_special}`` -> ``{tokens}``   ``{content}``
llama-cpp-python    ``/extras/tokenize`` ``{input,   ``/extras/detokenize`` ``{tokens}`` ->
                    model}`` -> ``{tokens}``         ``{text}``
==================  ==============================  =========================================

Special tokens are not counted: the server's count of the empty string (a BOS token,
for servers that always add it) is taken off every count. ``transformers serve``, TGI
and the OpenAI API have no such endpoints: the error says so and names ``--tokenizer
PATH``. Requests use one keep-alive connection (``http.client``); every text tokenized
is remembered, so a prompt rebuilt during the run costs no round trip.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import re
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from tokenmark.errors import ConfigError, TargetError
from tokenmark.inputs import json_loads
from tokenmark.redact import Redactor

__all__ = ["SHAPES", "ServerTokenizer"]

#: name -> (tokenize path, detokenize path, tokenize body key, detokenize text key)
SHAPES: dict[str, tuple[str, str, str, str]] = {
    "vllm": ("/tokenize", "/detokenize", "prompt", "prompt"),
    "sglang": ("/v1/tokenize", "/v1/detokenize", "prompt", "text"),
    "llama.cpp": ("/tokenize", "/detokenize", "content", "content"),
    "llama-cpp-python": ("/extras/tokenize", "/extras/detokenize", "input", "text"),
}
_WORD = re.compile(r"^ ?[a-z]{2,12}$")
#: Candidate words (each with a leading space) whose single-token ids prompts draw from.
_CANDIDATES = (
    "the of and to in is was for on that with as by at from his it an were are which "
    "this be or has had first one their its new after who they two her she been other "
    "when there all during into school time may years more most only over city some "
    "world would where later up such used many can state about national out known "
    "university united then made under team what government between while also year "
    "people season he not but him each end else return error reason content data done "
    "game part life group house family music country water film war name place line "
    "early under power light north south east west river small large great long high "
    "before against because through water point order number market report system "
    "public service history court church record album series station village center "
    "general police model field building market side young woman night light story "
    "ban bar bas bel dan del den dis fan gal kan lan lar man mar mas mel men nal pan par "
    "pas pen per ran ras sal san sel sen tan tar tel ten ter van var ven ver zen lin kin "
    "sin tin din pin bin fin min vin"
).split()


class ServerTokenizer:
    """Tokenize and detokenize through an OpenAI-compatible server's own endpoints."""

    def __init__(self, url: str, model: str, *, headers: Sequence[tuple[str, str]] = (),
                 timeout_s: float = 30.0, shape: str = "", secrets: Sequence[str] = ()
                 ) -> None:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"--tokenizer server needs an http(s) --url, not {url!r}")
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if self._https else 80)
        self._root = ""  # tokenize endpoints live at the server root, not under /v1
        self.model = model
        self._headers = {"Content-Type": "application/json", **dict(headers)}
        self._mask = Redactor(secrets)  # what a server's answer quoted back never shows
        self._timeout = timeout_s
        self._conn: http.client.HTTPConnection | None = None
        self._memo: dict[str, tuple[int, ...]] = {}
        self.round_trips = 0
        self.shape = shape or self._detect()
        self._special = len(self._tokenize(""))
        self._pieces = self._vocabulary()
        #: Word pieces that carry their leading space join into text without a round trip
        self._spaced = all(p.startswith(" ") for p in self._pieces.values())

    # -- the Tokenizer protocol -----------------------------------------------------------
    @property
    def name(self) -> str:
        return f"server:{self._host}:{self._port} {self.model} ({self.shape})"

    @property
    def fingerprint(self) -> str:
        h = hashlib.sha256(f"{self.shape}\n{self.model}\n{self._special}".encode())
        for tid, text in sorted(self._pieces.items()):
            h.update(f"{tid}={text}\n".encode())
        return h.hexdigest()[:16]

    def encode(self, text: str) -> list[int]:
        ids = self._memo.get(text)
        if ids is None:
            ids = self._memo[text] = tuple(self._tokenize(text)[self._special:])
        return list(ids)

    def decode(self, ids: Sequence[int]) -> str:
        pieces = self._pieces
        if self._spaced and all(i in pieces for i in ids):
            return "".join(pieces[i] for i in ids)  # byte-level BPE: pieces carry spaces
        return self._detokenize(list(ids))

    def count(self, text: str) -> int:
        return len(self.encode(text))

    def word_ids(self) -> Sequence[int]:
        return sorted(self._pieces)

    # -- the server ------------------------------------------------------------------------
    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _post(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        data = json.dumps(body).encode()
        for attempt in (0, 1):  # a kept-alive connection the server closed: once more
            if self._conn is None:
                cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
                self._conn = cls(self._host, self._port, timeout=self._timeout)
            try:
                self._conn.request("POST", self._root + path, data, self._headers)
                resp = self._conn.getresponse()
                raw = resp.read()
            except (OSError, http.client.HTTPException) as e:
                self.close()
                if attempt:
                    raise TargetError(f"the server's tokenizer at {self._host}:{self._port}"
                                      f"{path} did not answer ({e}); check --url") from None
                continue
            self.round_trips += 1
            try:
                return resp.status, json_loads(raw)
            except ValueError:  # not JSON, or nested too deep
                return resp.status, None
        raise AssertionError("unreachable")

    def _quote(self, answer: Any) -> str:
        """A server's answer in an error, secrets masked before it is cut."""
        return self._mask.text(str(answer)[:2048])[:120]

    def _body(self, shape: str, text: str) -> dict[str, Any]:
        key = SHAPES[shape][2]
        if shape in ("vllm", "sglang"):
            return {"model": self.model, key: text, "add_special_tokens": False}
        if shape == "llama.cpp":
            return {key: text, "add_special": False}
        return {key: text, "model": self.model}

    def _detect(self) -> str:
        probe = " hello"
        for shape, (path, _, _, _) in SHAPES.items():
            status, obj = self._post(path, self._body(shape, probe))
            tokens = obj.get("tokens") if isinstance(obj, dict) else None
            if status == 200 and isinstance(tokens, list) and tokens:
                return shape
        raise ConfigError(
            f"the server at {self._host}:{self._port} has no tokenize endpoint tokenmark "
            f"knows ({', '.join(f'{s}: {p[0]}' for s, p in SHAPES.items())}); give the "
            "model's tokenizer with --tokenizer PATH")

    def _tokenize(self, text: str) -> list[int]:
        path = SHAPES[self.shape][0]
        status, obj = self._post(path, self._body(self.shape, text))
        tokens = obj.get("tokens") if isinstance(obj, dict) else None
        if status != 200 or not isinstance(tokens, list):
            raise TargetError(f"the server's {path} answered HTTP {status} "
                              f"({self._quote(obj)}); give --tokenizer PATH instead")
        return [int(t) for t in tokens]

    def _detokenize(self, ids: list[int]) -> str:
        path, key = SHAPES[self.shape][1], SHAPES[self.shape][3]
        body: dict[str, Any] = {"tokens": ids}
        if self.shape in ("vllm", "sglang", "llama-cpp-python"):
            body["model"] = self.model
        status, obj = self._post(path, body)
        text = obj.get(key) if isinstance(obj, dict) else None
        if status != 200 or not isinstance(text, str):
            raise TargetError(f"the server's {path} answered HTTP {status} "
                              f"({self._quote(obj)}); give --tokenizer PATH instead")
        return text

    def _vocabulary(self) -> dict[int, str]:
        """Ids of words that are one token with their leading space: each candidate word
        is tokenized alone and kept when it is one token that decodes back to itself."""
        pieces: dict[int, str] = {}
        for word in _CANDIDATES:
            ids = self.encode(" " + word)
            if len(ids) == 1 and ids[0] not in pieces:
                text = self._detokenize(ids)
                if _WORD.match(text):
                    pieces[ids[0]] = text
        if len(pieces) < 16:
            raise ConfigError(
                f"the server's tokenizer ({self.shape}) makes too few plain words one token "
                f"({len(pieces)}) to build prompts from; give --tokenizer PATH")
        return pieces
