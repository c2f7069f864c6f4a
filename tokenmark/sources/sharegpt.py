"""ShareGPT conversations (``[{"id": ..., "conversations": [{"from": "human",
"value": ...}, {"from": "gpt", "value": ...}, ...]}, ...]``, JSON or JSON Lines).

Two readings, both replaying the dataset's own assistant answers
(:mod:`tokenmark.workload.conversations`):

- ``turns="first"`` (default; the convention of vLLM's and SGLang's benchmarks): one
  request per conversation, its first user message, output length = the first answer's
  token count;
- ``turns="all"``: one request per user message, carrying the whole history before it,
  output length = the dataset's answer to it.

Roles ``human``/``user`` are the user, ``gpt``/``chatgpt``/``assistant``/``bard``/
``bing`` the assistant, ``system`` a system message; conversations with no user
message are skipped.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from tokenmark.errors import DatasetError
from tokenmark.records import Message
from tokenmark.sources.tabular import MappedReader, TextTable
from tokenmark.sources.textfiles import checked_file
from tokenmark.tokenizer import Tokenizer
from tokenmark.workload.conversations import turn_rows
from tokenmark.workload.table import Row, TableDataset, TableOptions

__all__ = ["load_sharegpt"]

_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "chatgpt": "assistant",
          "assistant": "assistant", "bard": "assistant", "bing": "assistant",
          "system": "system"}


def _conversation(rec: dict[str, Any], where: str) -> list[Message]:
    turns = rec.get("conversations")
    if not isinstance(turns, list):
        raise DatasetError(f"{where}: no 'conversations' list; a ShareGPT record is "
                           '{"id": ..., "conversations": [{"from": ..., "value": ...}]}')
    out = []
    for t in turns:
        if not isinstance(t, dict) or not isinstance(t.get("value"), str):
            raise DatasetError(f"{where}: each turn needs 'from' and a text 'value'")
        role = _ROLES.get(str(t.get("from", "")).lower())
        if role is None:
            raise DatasetError(f"{where}: unknown speaker {t.get('from')!r}; use human, gpt "
                               "or system")
        out.append(Message(role, t["value"]))
    return out


def load_sharegpt(path: Path | str, tokenizer: Tokenizer, options: TableOptions, *,
                  turns: str = "first") -> TableDataset:
    """A dataset of ShareGPT conversations (see the module docstring)."""
    if turns not in ("first", "all"):
        raise DatasetError(f"unknown turns rule {turns!r}; choose first or all")
    p = checked_file(path)
    with open(p, "rb") as f:
        head = f.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
    table = TextTable(p, "json" if head.startswith(b"[") else "jsonl")
    first = turns == "first"

    def shape(rec: dict[str, Any], where: str, k: int) -> list[Row]:
        rows = turn_rows(_conversation(rec, where), k, first_only=first)
        if first:  # the single-turn convention sends the user message alone
            rows = [Row(prompt=r.messages[-1].content, reference_text=r.reference_text)
                    for r in rows if r.messages]
        return rows

    reader = MappedReader(table, shape, f"sharegpt:{turns}")
    return TableDataset(reader, tokenizer, replace(options, use_reference=True),
                        name=f"sharegpt({p}, turns={turns})")
