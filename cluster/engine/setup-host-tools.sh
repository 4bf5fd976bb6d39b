#!/usr/bin/env bash
# Host tools kafka-chaos needs beside the engine, installed from Debian only when missing (idempotent):
# debootstrap + maven (offline Kafka image), a JDK 17 (Spark; javac builds the Java client driver's worker),
# chromium (report browser test), go (Toxiproxy), fuse3 (power-loss disks).
set -euo pipefail
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
need=()
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
command -v mvn >/dev/null 2>&1 || need+=(maven)
command -v javac >/dev/null 2>&1 || need+=(openjdk-17-jdk-headless)  # brings the JRE (java) too
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v go >/dev/null 2>&1 || [ -x /usr/local/go/bin/go ] || need+=(golang)
command -v curl >/dev/null 2>&1 || need+=(curl)
command -v fusermount3 >/dev/null 2>&1 || need+=(fuse3)  # libfuse3 + fusermount3: power-loss disks
if [ "${#need[@]}" -gt 0 ]; then
  echo "setup-host-tools: installing ${need[*]}" >&2
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >&2
fi
