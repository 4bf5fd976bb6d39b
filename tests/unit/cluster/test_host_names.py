"""The brokers' host names for clients (cluster.host_names), on a temporary hosts file, never the real one:
the block's format, other lines left alone, atomic rewrites, and what a cluster with host names advertises
and breaks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kafka_chaos.cluster import host_names
from kafka_chaos.cluster.host_names import DEAD_ADDRESS, LOOPBACK, blocks, host_name, remove_blocks, set_block
from kafka_chaos.cluster.spec import ClusterSpec
from kafka_chaos.errors import ClusterError

SYSTEM = "127.0.0.1 localhost\n::1 localhost ip6-localhost\n# a comment of the system's\n10.0.0.5 db\n"


@pytest.fixture
def hosts(tmp_path: Path) -> Path:
    path = tmp_path / "hosts"
    path.write_text(SYSTEM)
    path.chmod(0o644)
    return path


def test_a_name_is_one_dns_label_per_broker_and_run() -> None:
    assert host_name("20261129T075000-dns_fail.x-0", 2) == "kc-20261129t075000-dns-fail-x-0-broker-2"
    long = host_name("r" * 80, 1)
    assert len(long) <= 63 and long.endswith("-broker-1") and long != host_name("r" * 79, 1)
    assert host_name("a", 1) != host_name("a", 2) and host_name("a", 1) != host_name("b", 1)


def test_a_block_adds_its_names_and_leaves_every_other_line_as_it_was(hosts: Path) -> None:
    set_block("run-a", {"kc-a-broker-1": LOOPBACK, "kc-a-broker-2": LOOPBACK}, hosts)
    set_block("run-b", {"kc-b-broker-1": LOOPBACK}, hosts)
    text = hosts.read_text()
    assert text.startswith(SYSTEM)
    assert blocks(text) == {"run-a": {"kc-a-broker-1": LOOPBACK, "kc-a-broker-2": LOOPBACK},
                            "run-b": {"kc-b-broker-1": LOOPBACK}}
    assert oct(hosts.stat().st_mode & 0o777) == "0o644", "the file keeps its permissions"


def test_breaking_a_name_rewrites_only_its_own_block(hosts: Path) -> None:
    set_block("run-a", {"kc-a-broker-1": LOOPBACK, "kc-a-broker-2": LOOPBACK}, hosts)
    set_block("run-b", {"kc-b-broker-1": LOOPBACK}, hosts)
    set_block("run-a", {"kc-a-broker-1": None, "kc-a-broker-2": DEAD_ADDRESS}, hosts)
    found = blocks(hosts.read_text())
    assert found["run-a"] == {"kc-a-broker-2": DEAD_ADDRESS}, "an unresolvable name is left out"
    assert found["run-b"] == {"kc-b-broker-1": LOOPBACK}
    assert hosts.read_text().startswith(SYSTEM)


def test_removing_blocks_restores_the_file_exactly(hosts: Path) -> None:
    set_block("run-a", {"kc-a-broker-1": LOOPBACK}, hosts)
    set_block("run-b", {"kc-b-broker-1": LOOPBACK}, hosts)
    assert remove_blocks(frozenset({"run-a"}), hosts) == ["run-a"]
    assert list(blocks(hosts.read_text())) == ["run-b"]
    assert remove_blocks(None, hosts) == ["run-b"]
    assert hosts.read_text() == SYSTEM
    before = hosts.stat().st_mtime_ns
    assert remove_blocks(None, hosts) == [] and hosts.stat().st_mtime_ns == before, "nothing to remove: unwritten"


def test_a_rewrite_replaces_the_file_whole_and_leaves_no_temporary_file(hosts: Path) -> None:
    inode = hosts.stat().st_ino
    set_block("run-a", {"kc-a-broker-1": LOOPBACK}, hosts)
    assert hosts.stat().st_ino != inode, "renamed over, so a reader sees the old file or the new one"
    assert sorted(p.name for p in hosts.parent.iterdir()) == ["hosts"]


def test_a_hosts_file_that_cannot_be_renamed_over_is_rewritten_in_place(hosts: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    def busy(*_: Any) -> None:
        raise OSError(16, "Device or resource busy")  # a bind-mounted /etc/hosts

    monkeypatch.setattr("os.replace", busy)
    set_block("run-a", {"kc-a-broker-1": LOOPBACK}, hosts)
    assert blocks(hosts.read_text()) == {"run-a": {"kc-a-broker-1": LOOPBACK}}
    assert sorted(p.name for p in hosts.parent.iterdir()) == ["hosts"]


def test_an_unwritable_hosts_file_is_a_paragraph_naming_the_fix(tmp_path: Path) -> None:
    why = host_names.problem(tmp_path / "missing-dir" / "hosts")
    assert why is not None and "not writable" in why and "remove the dns-fail faults" in why
    writable = tmp_path / "hosts"
    writable.write_text(SYSTEM)
    assert host_names.problem(writable) is None


# -- a cluster with host names (no engine: only what it advertises and writes) ---------------------------------


@pytest.fixture
def cluster(hosts: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    from kafka_chaos.cluster import kafka

    monkeypatch.setattr(kafka, "docker_client", lambda: None)
    monkeypatch.setattr(host_names, "HOSTS_PATH", hosts)
    c = kafka.KafkaCluster(ClusterSpec(nodes=3, host_names=True), run_id="t-1")
    c._write_host_names()
    return c


def test_brokers_advertise_their_names_to_clients_and_the_harness_keeps_an_address(cluster: Any) -> None:
    node = cluster.node(2)
    advertised = node.server_properties()["advertised.listeners"]
    assert f"CLIENT://kc-t-1-broker-2:{node.client_port}" in advertised
    assert f"DIRECT://127.0.0.1:{node.direct_port}" in advertised, "the harness's admin needs no name"
    assert cluster.bootstrap_servers().split(",")[1] == f"kc-t-1-broker-2:{node.client_port}"
    assert all(s.startswith("127.0.0.1:") for s in cluster.bootstrap_servers(direct=True).split(","))


def test_a_plain_cluster_keeps_the_loopback_address(monkeypatch: pytest.MonkeyPatch) -> None:
    from kafka_chaos.cluster import kafka

    monkeypatch.setattr(kafka, "docker_client", lambda: None)
    c = kafka.KafkaCluster(ClusterSpec(nodes=1), run_id="t-2")
    assert f"CLIENT://127.0.0.1:{c.node(1).client_port}" in c.node(1).server_properties()["advertised.listeners"]
    assert c.node(1).direct_port is None


def test_breaking_and_restoring_a_brokers_name(cluster: Any, hosts: Path) -> None:
    assert cluster.break_host_name(1, "unresolvable") == {"kc-t-1-broker-1": None}
    assert cluster.break_host_name(3, "dead-address") == {"kc-t-1-broker-3": DEAD_ADDRESS}
    assert blocks(hosts.read_text())["t-1"] == {"kc-t-1-broker-2": LOOPBACK, "kc-t-1-broker-3": DEAD_ADDRESS}
    assert cluster.restore_host_name(1) == {"kc-t-1-broker-1": LOOPBACK}
    assert blocks(hosts.read_text())["t-1"] == {"kc-t-1-broker-1": LOOPBACK, "kc-t-1-broker-2": LOOPBACK,
                                                "kc-t-1-broker-3": DEAD_ADDRESS}
    with pytest.raises(ValueError, match="unknown dns-fail mode"):
        cluster.break_host_name(2, "sideways")


def test_stopping_the_cluster_removes_its_block(cluster: Any, hosts: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kafka_chaos.cluster import kafka

    monkeypatch.setattr(kafka, "remove_labelled", lambda *_: None)
    monkeypatch.setattr(kafka, "forget", lambda *_: None)
    cluster.break_host_name(1, "unresolvable")
    cluster.stop()
    assert hosts.read_text() == SYSTEM


def test_a_cluster_that_cannot_write_its_names_starts_nothing(cluster: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from kafka_chaos.cluster import kafka

    monkeypatch.setattr(kafka, "require_image", lambda *_: None)
    monkeypatch.setattr(host_names, "HOSTS_PATH", Path("/nonexistent-dir/hosts"))
    monkeypatch.setattr(kafka, "track", lambda _: pytest.fail("nothing may start"))
    with pytest.raises(ClusterError, match="Nothing was started") as err:
        cluster.start()
    assert err.value.exit_code == 2


def test_host_names_are_refused_for_an_external_cluster() -> None:
    with pytest.raises(ValueError, match="does not own"):
        ClusterSpec(host_names=True, bootstrap_servers="b:9092")
