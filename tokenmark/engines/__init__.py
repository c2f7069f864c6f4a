"""Inference engines tokenmark runs itself: the contract (:mod:`.base`) and a real tiny
transformer on the CPU (:mod:`.hf`). The in-process SUT
(:mod:`tokenmark.adapters.engine_sut`) and the OpenAI-compatible front
(:mod:`tokenmark.servers.engine_http`) host any engine that keeps the contract."""
