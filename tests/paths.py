"""Where tests find the shared reference data (see tests/data/README.md)."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_env = os.environ.get("TOKENMARK_SHARED")
SHARED_DATA = Path(_env) / "data" if _env else ROOT / "tests" / "data" / "shared"
SAMPLES = SHARED_DATA / "mlperf" / "samples"
RESULTS_CSV = SHARED_DATA / "mlperf" / "llm_results_v4.1_v5.1.csv"
ACCELERATORS_CSV = SHARED_DATA / "accelerators.csv"
MODELS_CSV = SHARED_DATA / "models.csv"
