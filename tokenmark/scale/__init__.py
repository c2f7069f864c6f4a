"""Scale: find-peak, sweeps and scaling-efficiency runs (their pure parts).

The runs themselves are driven by :mod:`tokenmark.api.scale`; this package holds what
decides and summarises them: the peak search and its probe judgement
(:mod:`~tokenmark.scale.findpeak`), sweep rows and the Pareto front
(:mod:`~tokenmark.scale.sweep`), scaling efficiency with its interval
(:mod:`~tokenmark.scale.scaling`), and replicas of in-process systems
(:mod:`~tokenmark.scale.replicas`).
"""
