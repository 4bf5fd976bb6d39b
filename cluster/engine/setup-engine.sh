#!/usr/bin/env bash
# Make a Docker-API engine available, idempotently.
#  - DOCKER_HOST set and answering, or a Docker engine on the default socket: use it, change nothing.
#  - otherwise: install Podman (+ runc) from Debian, install our containers.conf, start
#    `podman system service` on /run/podman/podman.sock.
# Prints the DOCKER_HOST to use on its last line.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
podman_sock=/run/podman/podman.sock

answers() {  # $1 = unix socket path
  [ -S "$1" ] && curl -fsS --max-time 3 --unix-socket "$1" http://d/_ping >/dev/null 2>&1
}

if [ -n "${DOCKER_HOST:-}" ] && [[ "$DOCKER_HOST" == unix://* ]] && answers "${DOCKER_HOST#unix://}"; then
  echo "$DOCKER_HOST"; exit 0
fi
if answers /var/run/docker.sock; then
  echo "unix:///var/run/docker.sock"; exit 0
fi
if answers "$podman_sock"; then
  echo "unix://$podman_sock"; exit 0
fi

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
need=()
for cmd in podman runc iptables ip debootstrap curl; do
  command -v "$cmd" >/dev/null 2>&1 || need+=("$cmd")
done
if [ "${#need[@]}" -gt 0 ]; then
  echo "setup-engine: installing podman runc iptables iproute2 debootstrap (missing: ${need[*]})" >&2
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq \
    podman runc iptables iproute2 debootstrap curl >&2
fi
if ! cmp -s "$here/containers.conf" /etc/containers/containers.conf 2>/dev/null; then
  $sudo install -D -m 644 "$here/containers.conf" /etc/containers/containers.conf
fi
$sudo mkdir -p "$(dirname "$podman_sock")"
# setsid + nohup: the service must outlive the make/CI step that started it. It must not keep the caller's
# other open files (a lock a `flock` wrapper holds would stay held for as long as the service runs).
(
  for fd in /proc/$BASHPID/fd/*; do
    fd=${fd##*/}
    [ "$fd" -gt 2 ] && eval "exec $fd>&-"
  done
  exec $sudo setsid nohup podman system service --time=0 "unix://$podman_sock" \
    >/tmp/kafka-chaos-podman-service.log 2>&1 < /dev/null
) &
for _ in $(seq 1 60); do
  answers "$podman_sock" && { echo "unix://$podman_sock"; exit 0; }
  sleep 0.5
done
echo "setup-engine: podman system service did not answer on $podman_sock; see /tmp/kafka-chaos-podman-service.log" >&2
exit 1
