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
- :mod:`~tokenmark.sim.workloads`: the benchmarks' request lengths;
- :mod:`~tokenmark.sim.sut`: the same model as an in-process system under test for the
  real runner, on any clock.

The entry points (writing results folders) are in :mod:`tokenmark.sim_api`.
"""
