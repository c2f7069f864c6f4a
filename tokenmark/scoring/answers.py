"""Answer extraction for the exact-match and numeric benchmarks, as the references do it.

Each function mirrors one reference parser (behaviour, not code):

* GSM8K (mixtral-8x7b, ``evaluate-accuracy.py``): the first number after the last
  ``"The answer is"``, else the last number in the text, of the prediction cut at
  ``"\\nQ:"``; commas removed; compared as floats with the reference answer.
* Multiple choice (deepseek-r1 and gpt-oss-120b ``eval_accuracy.py``): GPQA (A-D) and
  MMLU-Pro (A-J). The deepseek-r1 parser takes the last ``ANSWER``/``FINAL ANSWER``
  letter (MMLU-Pro: else the last standalone letter); the gpt-oss parser first isolates
  the harmony ``final`` channel, strips markdown bold, and tries a leading letter, then
  ``Answer: X``, then the deepseek rule.
* AIME: the last ``\\boxed{N}``, else the last ``Answer: N``; an integer 0-999.
* MATH-500: the content of the last ``\\boxed{...}`` (braces balanced). The references
  grade it with PRM800K's ``grade_answer`` (sympy-based equivalence), which is not
  reproduced: :func:`math_equal` compares after a light normalisation (spaces,
  ``\\left``/``\\right``, ``\\dfrac``, a trailing period, ``^\\circ``, a leading
  ``x =``), so it can only under-count equivalent answers; scores say so.
* LiveCodeBench and MBXP run generated code in sandboxes; tokenmark does not run code,
  so those samples are reported as not evaluated.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = [
    "aime_answer",
    "boxed",
    "choice_deepseek",
    "choice_gptoss",
    "gsm8k_correct",
    "gsm8k_number",
    "math_equal",
]

_NUMBER: Final = re.compile(r"-?[\d,]*\.?\d+", re.MULTILINE | re.DOTALL | re.IGNORECASE)


def gsm8k_number(text: str, delimiter: str = "The answer is") -> str:
    """The most relevant number of a GSM8K answer, commas removed ("" if none)."""
    text = text.split("\nQ:")[0]
    if delimiter in text:
        found = _NUMBER.findall(text.split(delimiter)[-1])
        if found:
            return str(found[0]).replace(",", "")
    found = _NUMBER.findall(text)
    return str(found[-1]).replace(",", "") if found else ""


def _float(x: str) -> float | None:
    try:
        return float(x)
    except ValueError:
        return None


def gsm8k_correct(prediction: str, reference: str) -> bool:
    got = _float(gsm8k_number(prediction))
    return got is not None and _float(str(reference)) == got


def _choice_rule(text: str, max_option: str) -> str | None:
    text = text.replace(r"\n", "\n").replace(r"\'", "'")
    pattern = (rf"\b(?:ANSWER|FINAL\s*ANSWER)\b\s*[:=]?\s*(?:\(?\s*([A-{max_option}])\s*\)?)"
               r"(?:\s*$|[^A-Za-z])")
    found = list(re.finditer(pattern, text, re.IGNORECASE))
    if found:
        return found[-1].group(1).upper()
    return None


def choice_deepseek(text: str, max_option: str = "D") -> str | None:
    """deepseek-r1's multiple-choice parser (``D``: GPQA, ``J``: MMLU-Pro)."""
    text = text.strip()
    if not text:
        return None
    if text.startswith(("['", '["')) and text.endswith(("']", '"]')):
        text = text[2:-2].strip()
    got = _choice_rule(text, max_option)
    if got is None and max_option == "J":
        loose = list(re.finditer(r"\b([A-J])\b", text, re.IGNORECASE))
        if loose:
            return loose[-1].group(1).upper()
    return got


def choice_gptoss(text: str, max_option: str = "D") -> str | None:
    """gpt-oss-120b's multiple-choice parser (harmony ``final`` channel first)."""
    text = text.strip()
    if not text:
        return None
    m = re.search(r"<\|channel\|>final[^<]*<\|message\|>(.*?)(?:<\|return\|>|$)", text,
                  re.DOTALL)
    final = m.group(1).strip() if m else text
    final = re.sub(r"\*\*([^*]+)\*\*", r"\1", final)
    if final.startswith(("['", '["')) and final.endswith(("']", '"]')):
        final = final[2:-2].strip()
    final = final.replace(r"\n", "\n").replace(r"\'", "'")
    lead = re.match(rf"^[^a-zA-Z]*([A-{max_option}])(?:[^a-zA-Z]|$)", final.strip(),
                    re.IGNORECASE)
    if lead:
        return lead.group(1).upper()
    ans = re.search(rf"\b(?:Answer|ANSWER)\s*[:.]?\s*([A-{max_option}])\b", final,
                    re.IGNORECASE)
    if ans:
        return ans.group(1).upper()
    got = _choice_rule(text, max_option)
    if got is None and max_option == "J":
        loose = list(re.finditer(rf"\b([A-{max_option}])\b", final, re.IGNORECASE))
        if loose:
            return loose[-1].group(1).upper()
    return got


def boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{...}``, braces balanced."""
    idx = text.rfind(r"\boxed{")
    if idx < 0:
        return None
    depth = 0
    start = i = idx + 7
    while i < len(text):
        c = text[i]
        if c == "{":
            depth += 1
        elif c == "}":
            if depth == 0:
                return text[start:i].strip()
            depth -= 1
        i += 1
    return None


def aime_answer(text: str) -> int | None:
    """An AIME answer: the last ``\\boxed{N}``, else the last ``Answer: N`` (0-999)."""
    found = list(re.finditer(r"\\boxed{\s*(\d+)\s*}", text))
    if found:
        digits = found[-1].group(1)
    else:
        answers = list(re.finditer(r"Answer:\s*(\d+)(?!\.)\b", text,
                                   re.IGNORECASE | re.MULTILINE))
        if not answers:
            return None
        digits = answers[-1].group(1)
    value = int(digits)
    return value if 0 <= value <= 999 else None


def _normal(s: str) -> str:
    s = s.strip().rstrip(".")
    s = re.sub(r"\\left|\\right|\\!|\\,|\\;|\s+", "", s)
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    s = s.replace("^\\circ", "").replace("^{\\circ}", "")
    s = re.sub(r"^[a-z]=", "", s)
    return s


def math_equal(parsed: str | None, reference: str) -> bool:
    """MATH-500 answers equal after normalisation (see the module docstring)."""
    if not parsed or not str(reference).strip():
        return False
    return _normal(parsed) == _normal(str(reference))
