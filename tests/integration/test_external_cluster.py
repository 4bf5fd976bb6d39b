"""`[cluster] bootstrap_servers`: a run against a cluster kafka-chaos did not start, faults from the user's
commands. The 'external' cluster is one started here the ordinary way; the commands are the engine's."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kafka_chaos.cluster import ClusterSpec, KafkaCluster
from kafka_chaos.errors import ScenarioError
from kafka_chaos.harness.run import run_scenario
from kafka_chaos.harness.scenario import parse_scenario

pytestmark = pytest.mark.cluster


def test_a_run_against_a_cluster_started_elsewhere(tmp_path: Path, kafka_chaos_pool) -> None:
    kafka_chaos_pool.release()  # never two clusters at once
    engine = shutil.which("podman") or shutil.which("docker")
    assert engine, "the engine's command-line client (podman or docker) is needed to act on the nodes"
    with KafkaCluster(ClusterSpec(nodes=3)) as other:
        name = f"kc-{other.run_id}-node-{{node}}"
        scenario = {
            "name": "external", "duration_s": 14,
            "cluster": {"bootstrap_servers": other.bootstrap_servers(),
                        "control": {"kill": f"{engine} kill --signal KILL {name}", "start": f"{engine} start {name}",
                                    "logs": f"{engine} logs {name}"}},
            "topic": {"partitions": 1, "replication_factor": 3, "min_insync_replicas": 2},
            "workload": {"producers": 1, "rate": 150},
            "faults": {"schedule": [{"kind": "kill", "target": "leader", "at_s": 3, "duration_s": 5}]},
        }
        result = run_scenario(scenario, out=tmp_path)
        history = (result.run_dir / "history.jsonl").read_text()
        killed = result.results["faults"]["windows"][0]
        assert killed["f"] == "kill" and killed["end"] is not None, killed
        (node,) = killed["nodes"]
        assert other.node(node).running()  # the user's start command brought it back
        assert '"f":"restart"' in history
        assert "Kafka Server started" in (result.run_dir / "logs" / f"node-{node}.log").read_text()
        assert result.results["complete"] and not result.results["violations"]
        assert result.results["anomaly_counts"].get("lost-write", 0) == 0
        assert other.node(1).running() and other.node(2).running() and other.node(3).running()


@pytest.mark.parametrize(("faults", "control", "message"), [
    ([{"kind": "kill"}], {}, "need [cluster.control] commands: kill, start"),
    ([{"kind": "pause"}], {"pause": "x {node}"}, "commands: resume"),
    ([{"kind": "partition"}], {}, "partition (not possible on an external cluster)"),
])
def test_external_cluster_faults_need_their_commands(faults, control, message) -> None:
    with pytest.raises(ScenarioError) as err:
        parse_scenario({"name": "ext", "cluster": {"bootstrap_servers": "k:9092", "control": control},
                        "faults": {"schedule": faults}})
    assert message in str(err.value)
