"""What each Kafka release needs to start in KRaft mode (kafka_chaos.versions), how the image build applies it, and
how a version no image can be built of is refused before anything starts."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from kafka_chaos import versions
from kafka_chaos.cluster import images
from kafka_chaos.cluster.images import DEFAULT_KAFKA_VERSION, IMAGES_DIR, fit_launchers, missing_artifacts, not_served
from kafka_chaos.cluster.node import KafkaNode
from kafka_chaos.cluster.spec import ClusterSpec
from kafka_chaos.errors import ImageBuildError, ImageMissing, ScenarioError
from kafka_chaos.harness.scenario import parse_scenario

SUPPORTED = ["3.4.0", "3.4.1", "3.5.2", "3.6.2", "3.7.0", "3.8.1", "3.9.1", "4.0.1", DEFAULT_KAFKA_VERSION]


# -- which versions build ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", SUPPORTED)
def test_every_release_from_3_4_builds(version: str) -> None:
    assert versions.unbuildable(version) is None
    assert ClusterSpec(kafka_version=version).kafka_version == version


@pytest.mark.parametrize(("version", "says"), [
    ("2.8.0", "KRaft"), ("3.3.2", "3.4.0 or later"), ("0.11.0", "3.4.0 or later"),
    ("4.3", "not a release number"), ("latest", "not a release number"), ("3.7.0-rc1", "not a release number"),
])
def test_a_version_no_image_can_be_built_of_is_one_paragraph_naming_the_fix(version: str, says: str) -> None:
    why = versions.unbuildable(version)
    assert why is not None and says in why and version in why and "\n" not in why
    with pytest.raises(ValueError, match=r"3\.4\.0"):
        ClusterSpec(kafka_version=version)


def test_an_external_or_official_cluster_keeps_its_version_as_a_label() -> None:
    assert ClusterSpec(kafka_version="2.8.0", bootstrap_servers="127.0.0.1:9092").kafka_version == "2.8.0"
    assert ClusterSpec(kafka_version="3.3.2", official_image=True).image == "apache/kafka:3.3.2"


def test_release_numbers() -> None:
    assert versions.release_number("3.4.1") == (3, 4, 1)
    assert versions.release_number(" 4.10.0 ") == (4, 10, 0)
    assert versions.release_number("4.3") is None and versions.release_number(None) is None


# -- the tools' classes -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("launcher", "version", "cls"), [
    ("kafka-topics.sh", "3.6.2", "kafka.admin.TopicCommand"),
    ("kafka-topics.sh", "3.7.0", "org.apache.kafka.tools.TopicCommand"),
    ("kafka-leader-election.sh", "3.6.2", "kafka.admin.LeaderElectionCommand"),
    ("kafka-leader-election.sh", "3.7.0", "org.apache.kafka.tools.LeaderElectionCommand"),
    ("kafka-features.sh", "3.5.2", "kafka.admin.FeatureCommand"),
    ("kafka-features.sh", "3.6.0", "org.apache.kafka.tools.FeatureCommand"),
    ("kafka-consumer-perf-test.sh", "3.4.1", "kafka.tools.ConsumerPerformance"),
    ("kafka-consumer-perf-test.sh", "3.5.0", "org.apache.kafka.tools.ConsumerPerformance"),
    ("kafka-cluster.sh", "3.4.1", "kafka.tools.ClusterTool"),
    ("kafka-cluster.sh", "4.3.1", "org.apache.kafka.tools.ClusterTool"),
    ("kafka-metadata-quorum.sh", "3.4.0", "org.apache.kafka.tools.MetadataQuorumCommand"),
    ("kafka-storage.sh", "3.4.0", "kafka.tools.StorageTool"),
    ("kafka-storage.sh", "4.3.1", "kafka.tools.StorageTool"),
])
def test_each_tool_runs_the_class_its_release_has(launcher: str, version: str, cls: str) -> None:
    assert versions.tool_class(launcher, version) == cls


def test_the_launchers_are_written_for_the_default_version() -> None:
    """The templates in images/kafka/bin run the newest classes; the build rewrites them for older releases."""
    for launcher in versions.TOOL_CLASSES:
        text = (IMAGES_DIR / "kafka" / "bin" / launcher).read_text()
        assert f" {versions.tool_class(launcher, DEFAULT_KAFKA_VERSION)} " in text, launcher


def _launchers(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for launcher in versions.TOOL_CLASSES:
        (bin_dir / launcher).write_text((IMAGES_DIR / "kafka" / "bin" / launcher).read_text())
    return bin_dir


def test_the_build_points_each_launcher_at_the_class_in_the_release(tmp_path: Path) -> None:
    bin_dir = _launchers(tmp_path)
    wanted = {launcher: versions.tool_class(launcher, "3.4.1") for launcher in versions.TOOL_CLASSES}
    fit_launchers(bin_dir, "3.4.1", set(wanted.values()))
    topics = (bin_dir / "kafka-topics.sh").read_text()
    assert 'kafka-run-class.sh" kafka.admin.TopicCommand "$@"' in topics and "org.apache" not in topics
    for launcher, cls in wanted.items():
        assert f" {cls} " in (bin_dir / launcher).read_text()


def test_a_class_the_jars_lack_fails_the_build(tmp_path: Path) -> None:
    bin_dir = _launchers(tmp_path)
    classes = {versions.tool_class(launcher, "3.6.2") for launcher in versions.TOOL_CLASSES}
    with pytest.raises(ImageBuildError, match=r"kafka-topics\.sh"):
        fit_launchers(bin_dir, "3.6.2", classes - {"kafka.admin.TopicCommand"})


# -- the node's configuration per version ----------------------------------------------------------------------


def _node(version: str, role: str = "combined", **spec: object) -> KafkaNode:
    cluster = SimpleNamespace(spec=ClusterSpec(kafka_version=version, **spec), run_id="t", directory_ids={},
                              cluster_id="c", link_proxies=None)
    return KafkaNode(cluster, 1, role)  # type: ignore[arg-type]


@pytest.mark.parametrize("version", ["3.4.1", "3.6.2", "3.8.1"])
def test_before_kip_853_a_combined_node_advertises_no_controller_listener(version: str) -> None:
    props = _node(version).server_properties()
    assert "CONTROLLER" not in props["advertised.listeners"]
    assert "CONTROLLER://0.0.0.0:9093" in props["listeners"]
    assert props["controller.quorum.voters"] == "1@node-1:9093,2@node-2:9093,3@node-3:9093"
    assert "controller.quorum.bootstrap.servers" not in props
    fmt = _node(version)._entrypoint().split("kafka-storage.sh format")[1].split(";")[0]
    assert "--ignore-formatted" in fmt and "--initial-controllers" not in fmt and "--feature" not in fmt


@pytest.mark.parametrize("version", ["3.9.1", "4.0.1", DEFAULT_KAFKA_VERSION])
def test_from_3_9_a_combined_node_advertises_its_controller_listener_as_before(version: str) -> None:
    assert "CONTROLLER://node-1:9093" in _node(version).server_properties()["advertised.listeners"]


def _format_flags(node: KafkaNode) -> str:
    return node._entrypoint().split("kafka-storage.sh format")[1].split(";")[0]


@pytest.mark.parametrize("level", [0, 1, 2])
def test_the_cluster_is_formatted_with_the_transaction_version_asked_for(level: int) -> None:
    fmt = _format_flags(_node("4.0.1", transaction_version=level))
    assert f" --feature transaction.version={level} " in f"{fmt} "
    assert "transaction.version" not in _format_flags(_node("4.0.1"))  # unset: the version's own default


def test_transaction_version_and_elr_are_both_formatted() -> None:
    fmt = _format_flags(_node(DEFAULT_KAFKA_VERSION, elr=False, transaction_version=1))
    assert "--feature eligible.leader.replicas.version=0" in fmt and "--feature transaction.version=1" in fmt


@pytest.mark.parametrize("version", ["3.9.1", "3.6.2"])
def test_a_transaction_version_before_4_0_is_refused_naming_the_fix(version: str) -> None:
    with pytest.raises(ScenarioError, match=r"transaction_version: Kafka .* 4\.0\.1 or later"):
        parse_scenario({"name": "t", "cluster": {"kafka_version": version, "transaction_version": 1}})


@pytest.mark.parametrize("bad", [{"transaction_version": 3}, {"transaction_version": -1},
                                 {"transaction_version": 1, "bootstrap_servers": "kafka:9092"}])
def test_a_transaction_version_the_cluster_cannot_be_formatted_with_is_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ScenarioError, match="transaction_version"):
        parse_scenario({"name": "t", "cluster": {"kafka_version": "4.3.1", **bad}})


def test_a_node_moved_to_another_image_is_configured_for_that_version() -> None:
    node = _node("3.8.1")
    node.image = images.kafka_image("3.9.1")
    assert node.version == "3.9.1" and "CONTROLLER" in node.server_properties()["advertised.listeners"]


# -- a version Maven Central does not serve --------------------------------------------------------------------

MAVEN_OUTPUT = (
    "[ERROR] Failed to execute goal on project kafka-image-libs: Could not resolve dependencies for project "
    "io.kafka-chaos:kafka-image-libs:pom:1: The following artifacts could not be resolved: "
    "org.apache.kafka:kafka_2.13:jar:3.4.9, org.apache.kafka:kafka-tools:jar:3.4.9, "
    "org.apache.kafka:kafka-storage:jar:3.4.9: Could not find artifact org.apache.kafka:kafka_2.13:jar:3.4.9 in "
    "central (https://repo.maven.apache.org/maven2) -> [Help 1]"
)


def test_maven_s_not_found_is_told_from_no_answer() -> None:
    assert images.says_not_found(MAVEN_OUTPUT)
    assert images.says_not_found("org.apache.kafka:kafka_2.13:jar:3.4.9 was not found in https://repo during a "
                                 "previous attempt. This failure was cached in the local repository")
    assert not images.says_not_found("Could not transfer artifact org.apache.kafka:kafka_2.13:pom:3.4.9: "
                                     "Connection refused")


def test_maven_s_missing_artifacts_become_one_paragraph() -> None:
    missing = missing_artifacts(MAVEN_OUTPUT)
    assert missing == ["kafka_2.13:3.4.9", "kafka-tools:3.4.9", "kafka-storage:3.4.9"]
    text = not_served("3.4.9", missing)
    assert "serves no Kafka 3.4.9" in text and DEFAULT_KAFKA_VERSION in text and "\n" not in text
    partly = not_served("4.9.0", ["kafka-tools:4.9.0"])
    assert "org.apache.kafka:kafka-tools:4.9.0" in partly and "cannot be built" in partly


def _fake_mvn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, output: str, code: int) -> None:
    (tmp_path / "out.txt").write_text(output)
    mvn = tmp_path / "mvn"
    mvn.write_text(f"#!/bin/sh\ncat {tmp_path / 'out.txt'}\nexit {code}\n")
    mvn.chmod(mvn.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")


class NoImages:
    """An engine with no image at all."""

    class images:  # docker-py's attribute name
        @staticmethod
        def get(tag: str) -> None:
            import docker.errors

            raise docker.errors.ImageNotFound(tag)


def test_a_missing_image_of_a_version_maven_does_not_serve_says_so(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_mvn(tmp_path, monkeypatch, MAVEN_OUTPUT, 1)
    with pytest.raises(ImageMissing) as err:
        images.require_image(NoImages(), images.kafka_image("3.4.9"))  # type: ignore[arg-type]
    assert "cannot be" in str(err.value) and "serves no Kafka 3.4.9" in str(err.value)
    assert "image build" not in str(err.value)  # no command that would only fail


def test_a_missing_image_of_a_served_version_names_the_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_mvn(tmp_path, monkeypatch, "", 0)
    with pytest.raises(ImageMissing, match=r"kafka-chaos image build --kafka-version 3\.5\.2"):
        images.require_image(NoImages(), images.kafka_image("3.5.2"))  # type: ignore[arg-type]
    _fake_mvn(tmp_path, monkeypatch, "[ERROR] Could not transfer artifact: connection refused", 1)
    with pytest.raises(ImageMissing, match=r"kafka-chaos image build --kafka-version 3\.5\.2"):  # no answer: no verdict
        images.require_image(NoImages(), images.kafka_image("3.5.2"))  # type: ignore[arg-type]


def test_building_an_unbuildable_version_asks_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_engine() -> None:
        raise AssertionError("the engine was asked")

    monkeypatch.setattr(images, "docker_client", no_engine)
    with pytest.raises(ImageBuildError, match="KRaft"):
        images.build_all("2.8.0", lambda _: None)


# -- the command line ------------------------------------------------------------------------------------------


def test_run_of_an_unbuildable_version_exits_2_before_any_container(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    import kafka_chaos.harness.run  # noqa: F401 - loaded, so its engine client is replaced below too
    from kafka_chaos.harness.cli import main

    def no_engine() -> None:
        raise AssertionError("the engine was asked")

    for module in [m for name, m in sys.modules.items() if name.startswith("kafka_chaos.")]:
        if hasattr(module, "docker_client"):
            monkeypatch.setattr(module, "docker_client", no_engine)
    scenario = tmp_path / "old.toml"
    scenario.write_text('name = "old"\nduration_s = 5\n[cluster]\nkafka_version = "2.8.0"\n')
    monkeypatch.setattr(sys, "argv", ["kafka-chaos", "run", str(scenario), "--out", str(tmp_path / "out")])
    with pytest.raises(SystemExit) as exit_:
        main()
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "2.8.0" in err and "3.4.0 or later" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_a_scenario_names_the_version_field() -> None:
    from kafka_chaos.errors import ScenarioError

    with pytest.raises(ScenarioError, match=r"cluster: Kafka 2\.8\.0 cannot be started"):
        parse_scenario({"name": "x", "cluster": {"kafka_version": "2.8.0"}})


def test_make_test_builds_the_oldest_release_its_integration_test_starts() -> None:
    makefile = (Path(__file__).resolve().parents[3] / "Makefile").read_text()
    images_target = makefile.split("\nimages:")[1].split("\n\n")[0]
    assert f"--kafka-version {versions.OLDEST_RELEASE} --no-toxiproxy" in images_target


def test_cluster_up_of_an_unbuildable_version_is_a_usage_error() -> None:
    from typer.testing import CliRunner

    from kafka_chaos.harness.cli import app

    result = CliRunner().invoke(app, ["cluster", "up", "--kafka-version", "3.3.2"])
    assert result.exit_code == 2
    assert "3.4.0 or later" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)  # a message, not a traceback
