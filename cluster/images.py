"""The Kafka and Toxiproxy images: build them offline once (cached by version), or pull where a registry is reachable.

Offline Kafka image (docs/architecture.md §6):
  1. base   `localhost/kafka-chaos/base:bookworm`: `debootstrap --variant=minbase` of Debian bookworm with
            openjdk-17-jre-headless iproute2 iptables procps, imported as an image. Also the side-car image
            that runs iptables in a node's network namespace.
  2. libs   Kafka's jars for one pinned version, resolved by Maven from Maven Central (images/kafka/pom.xml).
  3. image  `localhost/kafka-chaos/kafka:<version>` = base + libs + our launchers (images/kafka/bin), each pointed at
            the class that version has for its tool (kafka_chaos.versions.TOOL_CLASSES).
Any release from 3.4.0 builds (kafka_chaos.versions.unbuildable says why another cannot, before anything is built).
Toxiproxy: a static build of images/toxiproxy/kafkatoxic (Toxiproxy v2.12.0's server with the `kafka` toxic compiled
in: faults on the requests or responses of chosen Kafka APIs), its modules from the Go module proxy, in a scratch
image.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tarfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import docker
import docker.errors

from kafka_chaos import versions
from kafka_chaos.cluster.engine import docker_client
from kafka_chaos.cluster.settings import NODE_JVM_OPTS
from kafka_chaos.errors import ImageBuildError, ImageMissing

DEFAULT_KAFKA_VERSION = "4.3.1"  # newest 4.x whose kafka-tools resolves from Maven Central (4.4.0's does not yet)
TOXIPROXY_VERSION = "2.12.0"
BASE_IMAGE = "localhost/kafka-chaos/base:bookworm"
IMAGES_DIR = Path(__file__).resolve().parent.parent / "images"
TOXIPROXY_SOURCE = IMAGES_DIR / "toxiproxy" / "kafkatoxic"


def source_digest(root: Path) -> str:
    """A short digest of a Go module's sources (tests and fixtures aside)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in (".go", ".mod", ".sum")
                       and not p.name.endswith("_test.go")):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


TOXIPROXY_IMAGE = f"localhost/kafka-chaos/toxiproxy:{TOXIPROXY_VERSION}-kafka-{source_digest(TOXIPROXY_SOURCE)}"
"""Tagged with the kafka toxic's source digest: an engine holding an image of older sources builds the new one."""
BASE_PACKAGES = ("openjdk-17-jre-headless", "iproute2", "iptables", "procps")
LABEL = "io.kafka-chaos.image"

Log = Callable[[str], None]


def kafka_image(version: str = DEFAULT_KAFKA_VERSION, *, official: bool = False) -> str:
    return f"apache/kafka:{version}" if official else f"localhost/kafka-chaos/kafka:{version}"


def cache_dir() -> Path:
    root = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "kafka-chaos"
    root.mkdir(parents=True, exist_ok=True)
    return root


def image_exists(client: docker.DockerClient, tag: str) -> bool:
    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    return True


def require_image(client: docker.DockerClient, tag: str) -> None:
    """Raise ImageMissing with the command that builds it, or, for a Kafka version no image can be built of, with
    why and what to use instead."""
    if image_exists(client, tag):
        return
    version = tag.rsplit(":", 1)[-1]
    if "toxiproxy" in tag:
        fix = "kafka-chaos image build"
    elif tag.startswith("apache/kafka"):
        fix = f"kafka-chaos image build --pull --kafka-version {version}"
    else:
        if why := versions.unbuildable(version) or maven_refuses(version):
            raise ImageMissing(f"The image {tag} is not built on this engine, and cannot be: {why}")
        fix = f"kafka-chaos image build --kafka-version {version}"
    raise ImageMissing(f"The image {tag} is not built on this engine. Build it once with:\n  {fix}")


KAFKA_ARTIFACTS = ("kafka_2.13", "kafka-tools", "kafka-storage")
"""The org.apache.kafka artifacts images/kafka/pom.xml asks Maven for (their dependencies come with them)."""


def missing_artifacts(maven_output: str) -> list[str]:
    """The org.apache.kafka artifacts a failed Maven resolution names as not found (`kafka-tools:3.4.9`)."""
    found = re.findall(r"org\.apache\.kafka:([\w.-]+):(?:jar|pom):([\w.-]+)", maven_output)
    return list(dict.fromkeys(f"{artifact}:{version}" for artifact, version in found))


def says_not_found(maven_output: str) -> bool:
    """Whether Maven's output says an artifact is not there (first asked, or remembered from an earlier ask),
    not only that it could not be fetched (no network: no answer about the version)."""
    return "Could not find artifact" in maven_output or "was not found in" in maven_output


def not_served(version: str, missing: list[str]) -> str:
    """The paragraph for a Kafka version whose jars Maven Central does not serve."""
    if any(m.startswith("kafka_2.13:") for m in missing):
        what = f"Maven Central serves no Kafka {version} (org.apache.kafka:kafka_2.13:{version} is not there)"
    else:
        what = (f"Maven Central does not serve every jar of Kafka {version} (missing: "
                f"{', '.join('org.apache.kafka:' + m for m in missing)})")
    return (f"{what}, so its image cannot be built offline. Use a released version that Maven Central serves, "
            f"{versions.OLDEST_RELEASE} or later (the default is "
            f"{DEFAULT_KAFKA_VERSION}); `podman images localhost/kafka-chaos/kafka` lists those built here.")


def maven_refuses(version: str) -> str | None:
    """Ask Maven Central whether it serves Kafka `version` (its kafka_2.13 pom, a few KiB): the paragraph when it
    says it does not; None when it does, or when it cannot be asked (no Maven, no answer: the build will say)."""
    if shutil.which("mvn") is None:
        return None
    cmd = ["mvn", "-q", "-B", "dependency:get", f"-Dartifact=org.apache.kafka:kafka_2.13:{version}:pom",
           "-Dtransitive=false"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return None
    output = proc.stdout + proc.stderr
    if proc.returncode == 0 or not says_not_found(output):
        return None
    return not_served(version, missing_artifacts(output) or [f"kafka_2.13:{version}"])


def _run(cmd: list[str], log: Log, *, cwd: Path | None = None, env: dict[str, str] | None = None) -> None:
    log("$ " + " ".join(cmd))
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise ImageBuildError(f"`{' '.join(cmd)}` failed (exit {proc.returncode}):\n{tail}")


def _debian_mirror() -> str:
    """The host's own Debian mirror, so the image comes from wherever this machine's apt already goes."""
    for path in (Path("/etc/apt/sources.list.d/debian.sources"), Path("/etc/apt/sources.list")):
        if not path.exists():
            continue
        text = path.read_text()
        if m := re.search(r"^URIs:\s*(\S+/debian)\s*$", text, re.MULTILINE):
            return m.group(1)
        if m := re.search(r"^deb\s+(?:\[[^\]]*\]\s+)?(\S+/debian)\s+bookworm\b", text, re.MULTILINE):
            return m.group(1)
    raise ImageBuildError(
        "Cannot find a Debian mirror in /etc/apt/sources.list(.d). Set KAFKA_CHAOS_DEBIAN_MIRROR to one."
    )


def build_base(client: docker.DockerClient, log: Log, *, force: bool = False) -> None:
    if image_exists(client, BASE_IMAGE) and not force:
        log(f"{BASE_IMAGE}: present")
        return
    if shutil.which("debootstrap") is None:
        raise ImageBuildError("debootstrap is not installed. Install it with:\n  apt-get install -y debootstrap")
    work = cache_dir() / "base"
    rootfs = work / "rootfs"
    if rootfs.exists():
        shutil.rmtree(rootfs)
    work.mkdir(parents=True, exist_ok=True)
    mirror = os.environ.get("KAFKA_CHAOS_DEBIAN_MIRROR") or _debian_mirror()
    _run(
        ["debootstrap", "--variant=minbase", f"--include={','.join(BASE_PACKAGES)}", "bookworm", str(rootfs), mirror],
        log,
    )
    # Slim the root: apt lists, caches and docs are not needed at run time.
    for sub in ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man", "usr/share/locale"):
        shutil.rmtree(rootfs / sub, ignore_errors=True)
    tar_path = work / "rootfs.tar"
    log(f"packing {rootfs} -> {tar_path}")
    with tarfile.open(tar_path, "w") as tar:
        tar.add(rootfs, arcname=".")
    repo, tag = BASE_IMAGE.rsplit(":", 1)
    log(f"importing {BASE_IMAGE}")
    client.api.import_image_from_file(str(tar_path), repository=repo, tag=tag)
    if not image_exists(client, BASE_IMAGE) and image_exists(client, f"{repo}:latest"):
        # Podman's Docker-API import ignores the tag and says `latest`.
        imported = client.images.get(f"{repo}:latest")
        imported.tag(repo, tag)
        client.images.remove(f"{repo}:latest")
    if not image_exists(client, BASE_IMAGE):
        raise ImageBuildError(f"importing {tar_path} did not produce {BASE_IMAGE}")
    tar_path.unlink()
    shutil.rmtree(rootfs, ignore_errors=True)


def resolve_kafka_libs(version: str, log: Log) -> Path:
    """Kafka's jars for `version` via Maven (checksums verified by Maven). Cached per version."""
    libs = cache_dir() / f"kafka-libs-{version}"
    if (libs / f"kafka_2.13-{version}.jar").exists():
        log(f"kafka {version} jars: cached in {libs}")
        return libs
    if shutil.which("mvn") is None:
        raise ImageBuildError("Maven is not installed. Install it with:\n  apt-get install -y maven")
    tmp = libs.with_name(libs.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    pom = IMAGES_DIR / "kafka" / "pom.xml"

    def copy(binding: str) -> None:
        try:
            _run(
                ["mvn", "-q", "-B", "-f", str(pom), f"-Dkafka.version={version}", f"-Dslf4j.binding={binding}",
                 "dependency:copy-dependencies", f"-DoutputDirectory={tmp}"],
                log,
            )
        except ImageBuildError as err:
            shutil.rmtree(tmp, ignore_errors=True)
            missing = missing_artifacts(str(err)) if says_not_found(str(err)) else []
            if missing:
                raise ImageBuildError(not_served(version, missing)) from None
            raise

    copy("log4j-slf4j-impl")
    # The binding must match the slf4j API that Kafka's own dependencies resolve to, or the broker logs nothing.
    if any(p.name.startswith("slf4j-api-2.") for p in tmp.iterdir()):
        shutil.rmtree(tmp)
        copy("log4j-slf4j2-impl")
    if not (tmp / f"kafka_2.13-{version}.jar").exists():
        raise ImageBuildError(f"Maven did not resolve kafka_2.13-{version}.jar; is {version} a released version?")
    tmp.rename(libs)
    return libs


KAFKA_IMAGE_REVISION = "3"
"""Raised whenever images/kafka changes what a built image holds (2: class-data sharing archives; 3: trained on
3.x too): an engine holding an image of an older revision rebuilds it on the next `kafka-chaos image build`."""
REVISION_LABEL = "io.kafka-chaos.image-revision"


def current_revision(client: docker.DockerClient, tag: str) -> bool:
    return client.images.get(tag).labels.get(REVISION_LABEL) == KAFKA_IMAGE_REVISION


def build_kafka(client: docker.DockerClient, version: str, log: Log, *, force: bool = False) -> str:
    tag = kafka_image(version)
    if image_exists(client, tag) and not force:
        if current_revision(client, tag):
            log(f"{tag}: present")
            return tag
        log(f"{tag}: present, built by an older images/kafka: rebuilding")
    if why := versions.unbuildable(version):
        raise ImageBuildError(why)
    libs = resolve_kafka_libs(version, log)  # before the base: a version Maven does not serve fails at once
    build_base(client, log)
    ctx = cache_dir() / f"kafka-context-{version}"
    shutil.rmtree(ctx, ignore_errors=True)
    shutil.copytree(IMAGES_DIR / "kafka", ctx, ignore=shutil.ignore_patterns("pom.xml"))
    shutil.copytree(libs, ctx / "libs")
    if not versions.at_least(version, versions.LOG4J2_FROM):  # see versions.LOG4J2_FROM
        for jar in (ctx / "libs").glob("slf4j-reload4j-*.jar"):
            jar.unlink()
    fit_launchers(ctx / "bin", version, jar_classes(ctx / "libs"))
    log(f"building {tag}")
    _build(client, ctx, tag, {"BASE_IMAGE": BASE_IMAGE, "NODE_JVM_OPTS": NODE_JVM_OPTS},
           {REVISION_LABEL: KAFKA_IMAGE_REVISION})
    shutil.rmtree(ctx, ignore_errors=True)
    return tag


def jar_classes(libs: Path) -> set[str]:
    """Every class the jars in `libs` hold, by its dotted name."""
    classes: set[str] = set()
    for jar in libs.glob("*.jar"):
        with zipfile.ZipFile(jar) as z:
            classes.update(n[: -len(".class")].replace("/", ".") for n in z.namelist() if n.endswith(".class"))
    return classes


def fit_launchers(bin_dir: Path, version: str, classes: set[str]) -> None:
    """Point each tool launcher (written for the newest Kafka) at the class `version` has for it
    (versions.TOOL_CLASSES); a class its jars lack fails the build here, not a fault in the middle of a run."""
    for launcher, by_line in versions.TOOL_CLASSES.items():
        path = bin_dir / launcher
        newest, wanted = by_line[0][1], versions.tool_class(launcher, version)
        text = path.read_text()
        if newest not in text:
            raise ImageBuildError(f"{path} does not run {newest}, the class versions.TOOL_CLASSES names for it")
        if wanted not in classes:
            raise ImageBuildError(f"Kafka {version}'s jars hold no {wanted}, the class versions.TOOL_CLASSES names "
                                  f"for {launcher} in {version}: that table is wrong for this version")
        path.write_text(text.replace(newest, wanted))


def build_toxiproxy(client: docker.DockerClient, log: Log, *, force: bool = False) -> str:
    if image_exists(client, TOXIPROXY_IMAGE) and not force:
        log(f"{TOXIPROXY_IMAGE}: present")
        return TOXIPROXY_IMAGE
    if shutil.which("go") is None:
        raise ImageBuildError("Go is not installed. Install it with:\n  apt-get install -y golang")
    binary = cache_dir() / f"toxiproxy-{TOXIPROXY_IMAGE.rsplit(':', 1)[1]}" / "server"
    if not binary.exists():
        env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-buildvcs=false -mod=readonly"}
        _run(["go", "build", "-trimpath", "-o", str(binary), "."], log, cwd=TOXIPROXY_SOURCE, env=env)
    ctx = cache_dir() / "toxiproxy-context"
    shutil.rmtree(ctx, ignore_errors=True)
    shutil.copytree(IMAGES_DIR / "toxiproxy", ctx, ignore=shutil.ignore_patterns("kafkatoxic"))
    shutil.copy2(binary, ctx / "toxiproxy-server")
    log(f"building {TOXIPROXY_IMAGE}")
    _build(client, ctx, TOXIPROXY_IMAGE, {})
    shutil.rmtree(ctx, ignore_errors=True)
    return TOXIPROXY_IMAGE


def pull_kafka(client: docker.DockerClient, version: str, log: Log) -> str:
    tag = kafka_image(version, official=True)
    log(f"pulling {tag}")
    try:
        client.images.pull("apache/kafka", tag=version)
    except docker.errors.APIError as err:
        raise ImageBuildError(
            f"Cannot pull {tag} ({err.explanation}). Without a registry, build it offline instead:\n"
            f"  kafka-chaos image build --kafka-version {version}"
        ) from None
    return tag


def _build(client: docker.DockerClient, ctx: Path, tag: str, buildargs: dict[str, str],
           labels: dict[str, str] | None = None) -> None:
    try:
        client.images.build(
            path=str(ctx), dockerfile="Containerfile", tag=tag, buildargs=buildargs, rm=True,
            labels={LABEL: tag, **(labels or {})}, pull=False,
        )
    except (docker.errors.BuildError, docker.errors.APIError) as err:
        raise ImageBuildError(f"building {tag} failed: {err}") from None


@dataclass(frozen=True)
class BuiltImages:
    kafka: str
    toxiproxy: str | None


def build_all(
    version: str, log: Log, *, pull: bool = False, toxiproxy: bool = True, force: bool = False
) -> BuiltImages:
    if not pull and (why := versions.unbuildable(version)):
        raise ImageBuildError(why)  # before the engine is asked anything
    client = docker_client()
    kafka = pull_kafka(client, version, log) if pull else build_kafka(client, version, log, force=force)
    if pull:
        build_base(client, log)  # the partition side-car still needs iptables
    tp = build_toxiproxy(client, log, force=force) if toxiproxy else None
    return BuiltImages(kafka=kafka, toxiproxy=tp)
