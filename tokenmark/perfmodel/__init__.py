"""The performance model of an LLM serving replica: no I/O, no clock, shared by the
emulated server (real time) and the simulator (virtual time).

- :mod:`~tokenmark.perfmodel.hardware`: accelerators and model architectures from the
  packaged data files (``data/accelerators.csv``, ``data/models.csv``, with sources);
- :mod:`~tokenmark.perfmodel.deployment`: a model on accelerators (precision, tensor /
  pipeline / expert / data parallelism, topology), its serving policy and the fitted
  efficiency parameters, with checks that name the numbers that do not fit;
- :mod:`~tokenmark.perfmodel.cost`: the time of one engine step and its breakdown
  (prefill compute, decode compute, weight and KV memory traffic, communication,
  overhead);
- :mod:`~tokenmark.perfmodel.engine`: continuous batching with chunked prefill and KV
  capacity for one replica, advanced one step at a time by its caller (requests may be
  aborted; a vision-language request's encoder work is charged with its prefill);
- :mod:`~tokenmark.perfmodel.vision`: how many tokens an image becomes and what encoding
  it costs (the Qwen-VL rule, ``data/vision.csv``);
- :mod:`~tokenmark.perfmodel.outputs`: how long the emulated model answers (exact, or a
  stop), and a reasoning model's reasoning/answer split from published output lengths
  (``data/outputs.csv``), drawn per prompt from a named seed.
"""

from tokenmark.perfmodel.cost import BREAKDOWN_KEYS, CostModel, StepComponents, StepCost
from tokenmark.perfmodel.deployment import Deployment, Efficiency, ServingPolicy, Topology
from tokenmark.perfmodel.engine import (
    EngineStats,
    Event,
    EventKind,
    ReplicaEngine,
    StepOutcome,
    StepPlan,
)
from tokenmark.perfmodel.hardware import (
    Accelerator,
    ModelArch,
    Precision,
    accelerators,
    find_accelerator,
    find_model,
    models,
)

__all__ = [
    "BREAKDOWN_KEYS",
    "Accelerator",
    "CostModel",
    "Deployment",
    "Efficiency",
    "EngineStats",
    "Event",
    "EventKind",
    "ModelArch",
    "Precision",
    "ReplicaEngine",
    "ServingPolicy",
    "StepComponents",
    "StepCost",
    "StepOutcome",
    "StepPlan",
    "Topology",
    "accelerators",
    "find_accelerator",
    "find_model",
    "models",
]
