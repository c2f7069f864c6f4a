"""MLPerf submission trees: packaging from tokenmark runs and a stricter checker.

An edge (DESIGN.md layer 4): it reads and writes files of the submission layout (digest §7)
and uses the domain's log parser, presets and rules.
"""
