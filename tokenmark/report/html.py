"""HTML rendering (the one module that imports Jinja2): the self-contained run report,
the comparison report, and the template environment the web UI renders through.

Escaping, the contract every caller relies on:

- templates are autoescaped, always (``autoescape=True`` whatever the file name), with
  undefined names an error; user-supplied strings (system names, rules, notes, paths)
  reach a page only through ``{{ ... }}`` and are never marked safe;
- the only :class:`markupsafe.Markup` values are tokenmark's own packaged files (CSS and
  JavaScript, checked to contain no ``</style`` or ``</script``) and the plot data
  from :func:`script_json`, which escapes ``<``, ``>``, ``&`` and the JavaScript line
  separators as ``\\uXXXX`` so that no data can close the ``<script>`` element it sits in.

A report is one file: CSS, uPlot (vendored, see ``static/uPlot.iife.min.js``), the plot
script and the data are inlined; a Content-Security-Policy meta tag forbids any
network fetch, so it opens offline and stays so.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from tokenmark import __version__
from tokenmark.report.compare import comparison_data
from tokenmark.report.data import load_results, run_report_data
from tokenmark.resultrows import UNVERIFIED_NOTE

__all__ = [
    "REPORT_FILE",
    "STATIC_DIR",
    "TEMPLATE_DIR",
    "Assets",
    "asset_text",
    "environment",
    "inline_assets",
    "render_comparison",
    "render_report",
    "script_json",
    "write_comparison",
    "write_report",
]

REPORT_FILE = "report.html"
TEMPLATE_DIR = Path(__file__).parent / "templates"
STATIC_DIR = Path(__file__).parent / "static"
#: Packaged files a page may use, in the order they are inlined.
CSS_FILES = ("report.css", "uPlot.min.css")
JS_FILES = ("uPlot.iife.min.js", "report.js")

_JS_ESCAPES = {ord("<"): "\\u003c", ord(">"): "\\u003e", ord("&"): "\\u0026",
               0x2028: "\\u2028", 0x2029: "\\u2029"}


def script_json(data: Any) -> Markup:
    """``data`` as JSON that is inert inside ``<script type="application/json">``."""
    text = json.dumps(data, separators=(",", ":"), allow_nan=False, default=_default)
    return Markup(text.translate(_JS_ESCAPES))  # noqa: S704 - escaped above


def _default(o: Any) -> Any:
    if isinstance(o, float) and not math.isfinite(o):
        return None
    raise TypeError(f"cannot put {type(o).__name__} in report data")


def asset_text(name: str) -> str:
    """A packaged static file; refuses names outside the package's list."""
    if name not in CSS_FILES + JS_FILES:
        raise ValueError(f"no packaged asset {name!r}")
    text = (STATIC_DIR / name).read_text(encoding="utf-8")
    closing = "</style" if name.endswith(".css") else "</script"
    if closing in text.lower():
        raise ValueError(f"{name} contains {closing}; it cannot be inlined")
    return text


@dataclass(frozen=True)
class Assets:
    """What a page template puts in ``<style>`` and ``<script>`` (inlined files)."""

    css: Markup
    js: Markup


def inline_assets() -> Assets:
    css = "\n".join(asset_text(n) for n in CSS_FILES)
    js = "\n".join(asset_text(n) for n in JS_FILES)
    return Assets(Markup(css), Markup(js))  # noqa: S704 - packaged files, checked


def _num(x: Any, digits: int = 6) -> str:
    """Numbers for tables: ``-`` for none, thousands separators, 6 significant digits."""
    if x is None or isinstance(x, bool) or not isinstance(x, int | float):
        return "-" if x is None else str(x)
    if isinstance(x, float) and not math.isfinite(x):
        return "-"
    if isinstance(x, int) or (abs(x) >= 1e6):
        return f"{x:,.0f}"
    return f"{x:,.{digits}g}"


def _pct_key(p: Any) -> str:
    return f"{float(p):g}"


def environment(extra: Mapping[str, Path] | None = None) -> jinja2.Environment:
    """The autoescaping environment: ``report/...`` templates, plus ``extra`` prefixes
    (the web UI adds ``ui/``)."""
    loaders: dict[str, jinja2.BaseLoader] = {"report": jinja2.FileSystemLoader(TEMPLATE_DIR)}
    for prefix, folder in (extra or {}).items():
        loaders[prefix] = jinja2.FileSystemLoader(folder)
    env = jinja2.Environment(
        loader=jinja2.PrefixLoader(loaders), autoescape=True,
        undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
    )
    env.filters["num"] = _num
    env.filters["pct_key"] = _pct_key
    env.globals["unverified_note"] = UNVERIFIED_NOTE
    return env


_ENV: jinja2.Environment | None = None


def _env() -> jinja2.Environment:
    global _ENV
    if _ENV is None:
        _ENV = environment()
    return _ENV


def render_report(results_dir: Path, *, records: bool = True) -> str:
    """The self-contained HTML report of one results folder."""
    doc = load_results(results_dir)
    data = run_report_data(results_dir, records=records)
    return _env().get_template("report/report.html.j2").render(
        doc=doc, data=data, data_json=script_json(data), assets=inline_assets(),
        source=str(results_dir), records_hint="no records.jsonl in the results folder")


def write_report(results_dir: Path, output: Path | None = None) -> Path:
    """Write ``report.html`` into the results folder (or to ``output``); returns the path."""
    folder = results_dir if results_dir.is_dir() else results_dir.parent
    out = output or folder / REPORT_FILE
    html = render_report(folder)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(html, encoding="utf-8")
    tmp.replace(out)
    return out


def render_comparison(run_dirs: Sequence[Path], *, links: bool = False) -> str:
    """One self-contained page comparing ``run_dirs`` (each a results folder).

    ``links`` points each run's name at its ``report.html`` (relative paths as given).
    """
    runs = [(str(d), str(d / REPORT_FILE) if links else None, load_results(d))
            for d in run_dirs]
    cmp = comparison_data(runs)
    return _env().get_template("report/comparison.html.j2").render(
        cmp=cmp, data_json=script_json({"comparison": cmp}), assets=inline_assets(),
        version=__version__)


def write_comparison(run_dirs: Sequence[Path], output: Path, *, links: bool = False) -> Path:
    html = render_comparison(run_dirs, links=links)
    tmp = output.with_name(output.name + ".tmp")
    tmp.write_text(html, encoding="utf-8")
    tmp.replace(output)
    return output
