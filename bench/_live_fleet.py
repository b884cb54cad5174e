"""A console's fleet state applied as a live console applies it, for the GC benchmarks
(bench/gc_sweep.py, bench/gc_census.py ``--live``): births and statuses, then rounds of v2
telemetry (bench/_payloads.py) through ``Ingest.handle``, each applied by ticks, with the
console's GC tuning (``runtime.tune_gc``, ``runtime.sweep_tick``)."""

from bench._common import require

EPOCH_MS = 1_767_225_600_000


class LiveFleet:
    """``n`` nodes of ``cluster`` in a session with ``tune_gc`` on; ``apply(k)`` runs the next
    ``k`` rounds (one sample a node each), ``check()`` fails loudly unless every sample was
    applied."""

    def __init__(self, n: int, cluster: str = "bench", personas: int = 512) -> None:
        from bench._payloads import EvolvingFleet
        from fleetdeck import runtime
        from fleetdeck.console.ingest import Ingest
        from fleetdeck.console.session import ConsoleSession

        self.n = n
        self.fleet = EvolvingFleet(n, cluster, EPOCH_MS - 60_000, personas=personas, wire=2)
        self.ingest = Ingest(cluster)
        self.session = ConsoleSession(cluster, ingest=self.ingest, follow_up=False,
                                      clock=lambda: 0.0)
        runtime.tune_gc()
        t0 = EPOCH_MS / 1000
        for i in range(n):
            self.ingest.handle(*self.fleet.birth(i), t0 - 2)
            self.ingest.handle(*self.fleet.status(i, EPOCH_MS - 2000), t0 - 2)
        self.session.tick(t0 - 1)
        self.applied = 0
        self.rounds = 0

    def apply(self, count: int) -> None:
        """``count`` rounds of every node's telemetry, each applied by ticks as live."""
        ingest, session, fleet = self.ingest, self.session, self.fleet
        for k in range(self.rounds, self.rounds + count):
            ts_ms = EPOCH_MS + k * 1000
            for i in range(self.n):
                ingest.handle(fleet.topics[i], fleet.telemetry(i, k, ts_ms), ts_ms / 1000 + 0.05)
            while True:
                self.applied += session.tick(ts_ms / 1000 + 0.2).messages
                if not session.backlog and not ingest._batch.messages:
                    break
        self.rounds += count

    def check(self) -> None:
        want = self.n * self.rounds
        require(self.applied == want, f"{self.applied} samples applied of {want}")
