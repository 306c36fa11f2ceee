#!/usr/bin/env bash
# Idempotent set-up for the ray backend's tests (tests/ray/): two extra Docker engines that act
# as the engines of two separate hosts. Each worker node of the test cluster talks to its own
# engine, so a call that lands on "node 2" really runs in node 2's engine.
#
# Every engine has its own socket, data root, exec root (and so its own containerd) and
# pidfile. Containers only ever run with network none, so the engines touch no iptables,
# masquerading or forwarding. Not `--bridge none`: a dockerd started with it deletes the host's
# docker0 interface, which breaks the MAIN engine's default bridge network. Each engine gets a
# bridge of its own instead, with a link-local /30 nothing routes to (as .ci/setup-gvisor.sh).
# The sandbox image is loaded into each engine only when its ID there differs from the main
# engine's. Running this again costs about a second.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
log() { printf '[setup-ray %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
# shellcheck source=engine-pid.sh
. "$(dirname "$0")/engine-pid.sh"

# Ray itself comes with the `ray` extra (also part of `dev`); install it when it is missing.
if ! python3 -c 'import ray' >/dev/null 2>&1; then
  log "installing proctor[ray]"
  python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore -e ".[ray]"
fi

tag=$(python3 -c 'from proctor.sandbox.docker.image import image_tag; print(image_tag())')
want_id=$(docker image inspect -f '{{.Id}}' "$tag" 2>/dev/null || true)
[ -n "$want_id" ] || { echo "setup-ray.sh: $tag is not built in the main engine; run .ci/setup.sh first" >&2; exit 1; }

for node in 1 2; do
  base=/run/proctor-ray/node$node
  sock=$base/docker.sock
  engine=(docker -H "unix://$sock")
  bridge=proctor-ray$node
  if ! ip link show "$bridge" >/dev/null 2>&1; then
    ip link add "$bridge" type bridge
    ip addr add "169.254.213.$((node * 4 + 1))/30" dev "$bridge"
  fi
  if ! "${engine[@]}" info >/dev/null 2>&1; then
    log "starting dockerd for ray test node $node ($sock)"
    mkdir -p "$base/exec" "/var/lib/proctor-ray/node$node" /var/log
    engine_pid "$base/dockerd.pid" "$sock" >/dev/null  # removes a stale pid file (engine-pid.sh)
    setsid nohup dockerd \
      --host "unix://$sock" \
      --data-root "/var/lib/proctor-ray/node$node" \
      --exec-root "$base/exec" \
      --pidfile "$base/dockerd.pid" \
      --bridge "$bridge" --iptables=false --ip6tables=false --ip-masq=false --ip-forward=false \
      >"/var/log/proctor-ray-dockerd-$node.log" 2>&1 </dev/null &
    for _ in $(seq 1 60); do
      "${engine[@]}" info >/dev/null 2>&1 && break
      sleep 1
    done
    "${engine[@]}" info >/dev/null 2>&1 || {
      echo "setup-ray.sh: dockerd $node did not answer within 60 s; see /var/log/proctor-ray-dockerd-$node.log" >&2
      exit 1
    }
  fi
  have_id=$("${engine[@]}" image inspect -f '{{.Id}}' "$tag" 2>/dev/null || true)
  if [ "$have_id" != "$want_id" ]; then
    log "loading $tag into engine $node"
    docker save "$tag" | "${engine[@]}" load >/dev/null
  fi
done
log "ray test engines ready"
