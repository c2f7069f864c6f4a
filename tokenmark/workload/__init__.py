"""Workloads beyond the plain synthetic dataset: file-backed tables, multi-turn
conversations, timed traces and images (pure: numpy and the standard library only).

Reading files is the edges' work (:mod:`tokenmark.sources`); this package turns what
they read into :class:`~tokenmark.dataset.Dataset` objects and schedules' offsets.
"""
