"""Distributed load generation (the ``ray`` extra): :mod:`tokenmark.distributed.ray_runner`.

Import that module only when a distributed run is asked for; it is the one that
imports ``ray``.
"""
