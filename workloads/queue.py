"""The default workload, Jepsen's queue: producers send uniquely tagged records, consumers poll them back, and a
final drain reads every partition to its end after the faults are healed (docs/architecture.md §2-§3)."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

from kafka_chaos.workloads.config import WorkloadConfig
from kafka_chaos.workloads.consumer import ConsumerSettings, ConsumerWorkload, final_drain
from kafka_chaos.workloads.drivers import IN_PROCESS, Driver, make_driver
from kafka_chaos.workloads.producer import ProducerSettings, ProducerWorkload

if TYPE_CHECKING:  # types only: workloads never import the harness at run time
    from kafka_chaos.harness.testmap import RunContext


class QueueWorkload:
    """`[workload]` taken as it is: producer threads × in-flight processes, consumers, the final drain."""

    def __init__(self, config: WorkloadConfig) -> None:
        self.config = config
        self.producers: list[ProducerWorkload] = []
        self.consumers: list[ConsumerWorkload] = []
        self._consumer_settings: ConsumerSettings | None = None
        self.driver: Driver = IN_PROCESS

    def start(self, ctx: RunContext) -> None:
        w, partitions = self.config, ctx.scenario.topic.partitions
        bootstrap = ctx.cluster.bootstrap_servers()
        self._consumer_settings = ConsumerSettings(bootstrap, ctx.topic, partitions, mode=w.consumer_mode,
                                                   max_records=w.poll_max_records, group_id=f"kafka-chaos-{ctx.topic}",
                                                   client_rack=w.client_rack, partition_eof=w.partition_eof,
                                                   reopen_s=w.consumer_reopen_s,
                                                   auto_offset_reset=w.auto_offset_reset)
        self.driver = make_driver(w)
        self.consumers = [ConsumerWorkload(self._consumer_settings, ctx.history, self.driver)
                          for _ in range(w.consumers)]
        values = itertools.count()  # run-wide unique values; next() on itertools.count is atomic in CPython
        producer_settings = ProducerSettings(
            bootstrap, ctx.topic, partitions, acks=w.acks, idempotence=w.idempotence, retries=w.retries,
            linger_ms=w.linger_ms, batch_size=w.batch_size, record_size=w.record_size, rate=w.rate,
            in_flight=w.in_flight, delivery_timeout_ms=w.delivery_timeout_ms, request_timeout_ms=w.request_timeout_ms)
        self.producers = [ProducerWorkload(producer_settings, ctx.history, values, seed=ctx.scenario.seed * 1000 + i,
                                           driver=self.driver) for i in range(w.producers)]
        for consumer in self.consumers:
            consumer.start()
        for producer in self.producers:
            producer.start()

    def progress(self) -> str:
        ok = sum(p.counts["ok"] for p in self.producers)
        info = sum(p.counts["info"] for p in self.producers)
        fail = sum(p.counts["fail"] for p in self.producers)
        polls = sum(c.polls for c in self.consumers)
        return f"sends ok {ok} info {info} fail {fail} · polls {polls}"

    def stop(self, ctx: RunContext, *, interrupted: bool) -> None:
        self.driver.thaw()  # a client pause left on must not hold the stop
        try:
            for p in self.producers:
                p.stop(flush_timeout_s=1 if interrupted else self.config.delivery_timeout_ms / 1000 + 5)
            for c in self.consumers:
                c.stop()
        finally:
            if interrupted:  # no final read follows
                self.driver.close()

    def final_read(self, ctx: RunContext) -> dict[str, Any] | None:
        """Read every partition from the start to its end offsets; recorded as polls like any other."""
        assert self._consumer_settings is not None, "final_read before start"
        try:
            drained = final_drain(self._consumer_settings, ctx.history, timeout_s=self.config.drain_timeout_s,
                                  driver=self.driver)
        finally:
            self.driver.close()
        return {"complete": drained}
