"""`kafka-chaos doctor`: what is missing, and the exact command that fixes each piece."""

from __future__ import annotations

import shutil
import socket
import subprocess
from dataclasses import dataclass

from kafka_chaos.cluster import labelled
from kafka_chaos.cluster.engine import SETUP_SCRIPT, docker_client, engine_url
from kafka_chaos.cluster.images import BASE_IMAGE, DEFAULT_KAFKA_VERSION, TOXIPROXY_IMAGE, image_exists, kafka_image
from kafka_chaos.cluster.sized_disk import missing_requirements as sized_disk_problems
from kafka_chaos.cluster.volatile_disk import missing_requirements
from kafka_chaos.errors import EngineUnavailable


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""


def _java_major() -> int | None:
    java = shutil.which("java")
    if java is None:
        return None
    out = subprocess.run([java, "-version"], capture_output=True, text=True).stderr
    for token in out.split('"')[1:2]:
        head = token.split(".")[0]
        return int(head) if head.isdigit() else None
    return None


def _free_ports(n: int = 16) -> bool:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return True
    except OSError:
        return False
    finally:
        for s in socks:
            s.close()


def run_checks(kafka_version: str = DEFAULT_KAFKA_VERSION) -> list[Check]:
    checks: list[Check] = []
    try:
        client = docker_client()
        version = client.version()
        engine = f"{version.get('Components', [{}])[0].get('Name', 'engine')} {version.get('Version', '?')}"
        checks.append(Check("container engine", True, f"{engine} at {engine_url()}"))
    except EngineUnavailable as err:
        checks.append(
            Check("container engine", False, str(err).split(" (")[0], f"make setup   # or: bash {SETUP_SCRIPT}")
        )
        client = None
    if client is not None:
        for tag in (kafka_image(kafka_version), BASE_IMAGE, TOXIPROXY_IMAGE):
            present = image_exists(client, tag)
            checks.append(
                Check(f"image {tag}", present, "built" if present else "not built",
                      "" if present else f"kafka-chaos image build --kafka-version {kafka_version}")
            )
        left = labelled(client)
        n_left = sum(len(v) for v in left.values())
        checks.append(
            Check("leftovers", n_left == 0, "none" if n_left == 0 else f"{n_left} labelled resources from earlier runs",
                  "" if n_left == 0 else "kafka-chaos clean")
        )
    for tool, pkg in (("debootstrap", "debootstrap"), ("mvn", "maven"), ("go", "golang")):
        have = shutil.which(tool) is not None
        checks.append(Check(f"{tool} (image builds)", have, "found" if have else "missing",
                            "" if have else f"apt-get install -y {pkg}"))
    major = _java_major()
    java_ok = major is not None and major >= 17
    checks.append(
        Check("JRE 17+ (Spark)", java_ok, f"java {major}" if major else "no java on PATH",
              "" if java_ok else "apt-get install -y openjdk-17-jre-headless")
    )
    disk_problems = missing_requirements(engine_url())
    checks.append(Check("volatile disks (power-loss)", not disk_problems,
                        "FUSE ready" if not disk_problems else "; ".join(disk_problems),
                        "" if not disk_problems else "make setup"))
    sized_problems = sized_disk_problems(engine_url())
    checks.append(Check("sized disks (disk-full)", not sized_problems,
                        "tmpfs mounts possible" if not sized_problems else "; ".join(sized_problems),
                        "" if not sized_problems else "run as root on the engine's machine"))
    ports = _free_ports()
    checks.append(Check("free loopback ports", ports, "ok" if ports else "cannot bind 127.0.0.1 ports",
                        "" if ports else "free ports on 127.0.0.1 (see `ss -ltn`)"))
    return checks
