"""The simulator: MLPerf-style benchmarks of clusters too big to own, in virtual time.

It reuses the real run's schedules, metrics, rules and writers and replaces the system
under test with a calibrated performance model (:mod:`tokenmark.perfmodel`):

- :mod:`~tokenmark.sim.plan`: what the user names -> a checked deployment (precision,
  tensor parallelism, replicas, serving policy, calibrated efficiency), by rules
  submitters follow;
- :mod:`~tokenmark.sim.cluster`: the replicas, their place in the topology, routing
  and prefill/decode hand-offs;
- :mod:`~tokenmark.sim.driver`: the discrete-event loop over a heap in virtual ns;
- :mod:`~tokenmark.sim.run`: schedule -> driver -> the metrics' columns -> summary and
  both verdicts; :mod:`~tokenmark.sim.explain` and :mod:`~tokenmark.sim.report`: why;
- :mod:`~tokenmark.sim.search`: the highest Server rate within latency limits;
- :mod:`~tokenmark.sim.scaling`: throughput and scaling efficiency across sizes;
- :mod:`~tokenmark.sim.published`, :mod:`~tokenmark.sim.fit`,
  :mod:`~tokenmark.sim.calibration` and :mod:`~tokenmark.sim.params`: fitting the
  efficiency parameters on published results and shipping them;
- :mod:`~tokenmark.sim.workloads`: the benchmarks' request lengths.

One performance model, shared with the emulated server: the emulated server's engine
(:class:`~tokenmark.engines.emulated.Emulator`, served in-process by
:class:`~tokenmark.adapters.emulated_sut.EmulatedSUT`) steps the same
:class:`~tokenmark.sim.cluster.Cluster` on a clock, and on a fake clock under the real
runner it gives the driver's times exactly (``tests/sim``).

The entry points (writing results folders) are in :mod:`tokenmark.api.simulation`.
"""
