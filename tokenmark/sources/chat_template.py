"""Chat templates: the one module that imports jinja2 (optional: the ``hf`` extra).

A model's chat template is the Jinja program in its ``tokenizer_config.json`` (or
``chat_template.jinja``) that turns messages into the prompt text the model was trained
on. It runs here as Hugging Face ``transformers`` runs it: a sandboxed environment with
``trim_blocks`` and ``lstrip_blocks``, the loop-control extension, ``raise_exception``,
``strftime_now`` and a ``tojson`` filter, with ``bos_token``/``eos_token`` and
``add_generation_prompt=True`` (the prompt ends where the assistant's answer begins).
Images appear in the messages as ``{"type": "image"}`` parts, as vision models'
templates expect; the data itself never reaches the template.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Sequence
from typing import Any

from tokenmark.errors import DatasetError
from tokenmark.records import Message

__all__ = ["ChatTemplate"]


class _TemplateRaised(Exception):
    pass


def _raise(message: str) -> None:
    raise _TemplateRaised(message)


def _tojson(x: Any, ensure_ascii: bool = False, indent: int | None = None,
            separators: tuple[str, str] | None = None, sort_keys: bool = False) -> str:
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def _strftime_now(fmt: str) -> str:
    return dt.datetime(2025, 1, 1).strftime(fmt)  # fixed: prompts must not change by date


class ChatTemplate:
    """A compiled chat template; ``origin`` names where it came from in errors."""

    def __init__(self, source: str, origin: str, *, bos_token: str = "",
                 eos_token: str = "") -> None:
        try:
            from jinja2 import TemplateSyntaxError
            from jinja2.ext import loopcontrols
            from jinja2.sandbox import ImmutableSandboxedEnvironment
        except ImportError:
            raise DatasetError("chat templates need jinja2: pip install 'tokenmark[hf]'"
                               ) from None
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                            extensions=[loopcontrols])
        env.filters["tojson"] = _tojson
        env.globals["raise_exception"] = _raise
        env.globals["strftime_now"] = _strftime_now
        try:
            self._template = env.from_string(source)
        except TemplateSyntaxError as e:
            raise DatasetError(f"{origin}: the chat template does not parse (template line "
                               f"{e.lineno}: {e.message}); fix it or give another with "
                               "--chat-template FILE") from None
        self.origin = origin
        self.source = source
        self._bos = bos_token
        self._eos = eos_token
        self.fingerprint = hashlib.sha256(source.encode()).hexdigest()[:16]

    def render(self, messages: Sequence[Message]) -> str:
        """The prompt text for ``messages``, ending where the answer begins."""
        data: list[dict[str, Any]] = []
        for m in messages:
            if m.images:
                parts: list[dict[str, Any]] = [{"type": "image"} for _ in m.images]
                parts.append({"type": "text", "text": m.content})
                data.append({"role": m.role, "content": parts})
            else:
                data.append({"role": m.role, "content": m.content})
        try:
            return self._template.render(messages=data, add_generation_prompt=True,
                                         bos_token=self._bos, eos_token=self._eos)
        except _TemplateRaised as e:
            raise DatasetError(f"{self.origin}: the chat template refused these messages "
                               f"({e}); check their roles and order") from None
        except Exception as e:  # a template is a program: any error is the template's
            raise DatasetError(f"{self.origin}: the chat template failed "
                               f"({type(e).__name__}: {e})") from None
