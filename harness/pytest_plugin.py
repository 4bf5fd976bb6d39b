"""pytest plugin (entry point `pytest11`): real-cluster fixtures and chaos runs for ordinary pytest tests.

Fixtures
  kafka_cluster   a running cluster, shared across the session by every test that asks for the same spec
                  (`@pytest.mark.kafka_cluster(nodes=3, controllers=3, ...)` picks the spec). Only one cluster
                  is up at a time (two on a small host starve each other); tests are grouped by spec so each
                  spec starts once. After each test every fault is healed.
  make_topic      factory: `make_topic(partitions=3, replication_factor=3, configs={...})` -> a fresh topic
                  name, deleted after the test.
  chaos_run       factory: `chaos_run(scenario_dict_or_path, **overrides)` -> the checked RunResult, on the
                  session's cluster when its spec matches.
Marker
  @pytest.mark.chaos(scenario="scenarios/kill-leader.toml", seed=1, **overrides): runs the scenario before the
  test; the test gets the result as the `chaos_result` fixture and fails with the violations and the report
  path when the checker finds any.
Interrupts
  While a cluster fixture is in use, SIGTERM (a CI cancel) ends the session as Ctrl-C does; an interrupted
  session then removes what is left of the clusters it started (not kept ones), checks that nothing is, and says
  so or names what is left (pytest's own exit code, 2, stays).
Options
  --kafka-chaos-keep           keep clusters after the session (debugging); `kafka-chaos cluster down` removes them
  --kafka-chaos-results DIR    where runs write their results (default: results/)
"""

from __future__ import annotations

import contextlib
import itertools
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kafka_chaos import interrupts
from kafka_chaos.cluster import ClusterPool, ClusterSpec, KafkaCluster, spec_key
from kafka_chaos.errors import KafkaChaosError


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kafka-chaos")
    group.addoption("--kafka-chaos-keep", action="store_true", default=False,
                    help="keep kafka-chaos clusters after the session (remove with `kafka-chaos cluster down`)")
    group.addoption("--kafka-chaos-results", default="results", metavar="DIR",
                    help="folder for chaos runs' results (default: results)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "kafka_cluster(**spec): the ClusterSpec the kafka_cluster fixture starts")
    config.addinivalue_line("markers", "chaos(scenario=..., seed=..., **overrides): run a chaos scenario")


@pytest.hookimpl(trylast=True)  # after the session's fixtures (the cluster pool) were torn down
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    from kafka_chaos.cluster.kafka import sweep_after_interrupt
    from kafka_chaos.cluster.labels import started_run_ids

    interrupted = exitstatus == pytest.ExitCode.INTERRUPTED or interrupts.received() is not None
    if not interrupted or not started_run_ids():  # a session that started no cluster has nothing to say
        return
    message = sweep_after_interrupt()
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(message, yellow=True)
    else:
        print(message, file=sys.stderr)


def _spec_from_marker(item: pytest.Item) -> ClusterSpec:
    marker = item.get_closest_marker("kafka_cluster")
    kwargs = dict(marker.kwargs) if marker else {}
    allowed = set(ClusterSpec.model_fields)
    unknown = set(kwargs) - allowed
    if unknown:
        raise pytest.UsageError(f"kafka_cluster marker: unknown fields {sorted(unknown)}; allowed: {sorted(allowed)}")
    return ClusterSpec(**kwargs)


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Group tests that use a cluster by spec (stable within a group) so each spec starts once."""
    def uses_cluster(item: pytest.Item) -> bool:
        names = getattr(item, "fixturenames", ())
        return "kafka_cluster" in names or "chaos_run" in names or item.get_closest_marker("chaos") is not None

    without = [i for i in items if not uses_cluster(i)]
    with_cluster = [i for i in items if uses_cluster(i)]
    order: dict[str, int] = {}
    for item in with_cluster:
        order.setdefault(spec_key(_spec_from_marker(item)), len(order))
    with_cluster.sort(key=lambda i: order[spec_key(_spec_from_marker(i))])
    items[:] = without + with_cluster


@pytest.fixture(scope="session")
def kafka_chaos_pool(request: pytest.FixtureRequest) -> Iterator[ClusterPool]:
    pool = ClusterPool(keep=bool(request.config.getoption("--kafka-chaos-keep")))
    # only while clusters may be up: other suites in the same environment keep pytest's own signal handling
    with interrupts.handling():
        yield pool
        pool.release()


@pytest.fixture
def kafka_cluster(request: pytest.FixtureRequest, kafka_chaos_pool: ClusterPool) -> Iterator[KafkaCluster]:
    try:
        cluster = kafka_chaos_pool.get(_spec_from_marker(request.node))
    except KafkaChaosError as err:
        notes = "\n".join(getattr(err, "__notes__", [])).splitlines()[-80:]  # the node logs' tail says why
        pytest.fail("\n".join([f"kafka-chaos could not start the cluster: {err}", *notes]), pytrace=False)
    yield cluster
    kafka_chaos_pool.heal_or_drop()


@pytest.fixture
def make_topic(kafka_cluster: KafkaCluster) -> Iterator[Callable[..., str]]:
    made: list[str] = []
    counter = itertools.count()

    def make(partitions: int = 3, replication_factor: int = 3, configs: dict[str, str] | None = None,
             name: str | None = None) -> str:
        topic = name or f"t{next(counter)}-{uuid.uuid4().hex[:8]}"
        kafka_cluster.create_topic(topic, partitions, replication_factor, configs)
        made.append(topic)
        return topic

    yield make
    if made:
        from confluent_kafka.admin import AdminClient

        with contextlib.suppress(Exception):
            for f in AdminClient(kafka_cluster.admin_config()).delete_topics(made).values():
                f.result(timeout=15)


@pytest.fixture
def kafka_chaos_results(request: pytest.FixtureRequest) -> Path:
    return Path(str(request.config.getoption("--kafka-chaos-results")))


@pytest.fixture
def chaos_run(kafka_chaos_pool: ClusterPool, kafka_chaos_results: Path) -> Iterator[Callable[..., Any]]:
    """Factory: run a scenario (path or dict) on the pool's cluster and return the checked RunResult."""
    from kafka_chaos.harness.run import run_scenario

    def run(scenario: str | Path | dict[str, Any], **overrides: Any) -> Any:
        return run_scenario(scenario, out=kafka_chaos_results, pool=kafka_chaos_pool, **overrides)

    yield run
    kafka_chaos_pool.heal_or_drop()


@pytest.fixture
def chaos_result(request: pytest.FixtureRequest, chaos_run: Callable[..., Any]) -> Any:
    """The result of the test's `@pytest.mark.chaos(...)` run; the test fails when it has violations."""
    marker = request.node.get_closest_marker("chaos")
    if marker is None:
        raise pytest.UsageError("chaos_result needs @pytest.mark.chaos(scenario=...)")
    kwargs = dict(marker.kwargs)
    scenario = kwargs.pop("scenario", None) or (marker.args[0] if marker.args else None)
    if scenario is None:
        raise pytest.UsageError("@pytest.mark.chaos needs scenario=<path or dict>")
    result = chaos_run(scenario, **kwargs)
    request.node.stash[CHAOS_RESULT] = result
    return result


CHAOS_RESULT = pytest.StashKey[Any]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    """After the test body: a chaos run with violations fails the test (as a failure, not a setup error),
    naming the violated anomalies and the report."""
    outcome = yield
    result = item.stash.get(CHAOS_RESULT, None)
    if result is not None and result.checked.violations:
        violations = result.checked.violations
        names = sorted({v.name or "?" for v in violations})
        pytest.fail(
            f"chaos run {result.run_id}: {len(violations)} violations ({', '.join(names)}); "
            f"report: {result.run_dir / 'report.html'}",
            pytrace=False,
        )
    return outcome
