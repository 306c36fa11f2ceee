#!/usr/bin/env bash
# Idempotent set-up of gVisor (runsc) for `sandbox.runtime: runsc` / `--runtime runsc`
# (docs/sandbox.md, "Runtimes"). Root, Debian 12, after the main engine is up.
#
# runsc runs under a SECOND dockerd of its own (socket, data root, exec root, pid file and
# config file all separate), so the main engine's configuration is never touched: users who
# do not ask for runsc see no change at all. Every step checks before it acts; a second run
# costs a second or two.
#
# Findings behind the choices (shared/notes/environment-findings.md): Debian's runsc (a 2022
# build) works only with --platform=ptrace (kvm hangs, systrap is unknown to it), and it must
# be registered with --network=none or container start fails on this kernel. The engine gets no
# iptables rules, no forwarding and no masquerading: sandboxes have no network anyway.
#
# Not `--bridge none`: a dockerd started with it deletes the host's docker0 interface
# (moby's removeDefaultBridgeInterface), which breaks the MAIN engine's default bridge network.
# The gVisor engine gets a bridge of its own instead, with a link-local /30 nothing routes to.
set -euo pipefail

base=/run/proctor-gvisor
sock="$base/docker.sock"
data_root=/var/lib/proctor-gvisor
config=/etc/proctor-gvisor/daemon.json
dockerd_log=/var/log/proctor-gvisor-dockerd.log
repo=$(cd "$(dirname "$0")/.." && pwd)
log() { printf '[setup-gvisor %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
gdocker() { docker -H "unix://$sock" "$@"; }

if ! command -v runsc >/dev/null; then
  log "installing runsc"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends runsc >/dev/null
fi
runsc_path=$(command -v runsc)

bridge=proctor-gv0
if ! ip link show "$bridge" >/dev/null 2>&1; then
  log "creating the gVisor engine's own bridge $bridge"
  ip link add "$bridge" type bridge
  ip addr add 169.254.213.1/30 dev "$bridge"
fi

mkdir -p "$base" "$data_root" "$(dirname "$config")"
want_config=$(cat <<EOF
{
  "runtimes": {
    "runsc": {
      "path": "$runsc_path",
      "runtimeArgs": ["--platform=ptrace", "--network=none", "--oci-seccomp"]
    }
  }
}
EOF
)
engine_args=(
  --host "unix://$sock" --data-root "$data_root" --exec-root "$base/exec" --pidfile "$base/dockerd.pid"
  --config-file "$config"
  --bridge "$bridge" --iptables=false --ip6tables=false --ip-forward=false --ip-masq=false
)
restart=0
if [ ! -f "$config" ] || [ "$(cat "$config")" != "$want_config" ]; then
  printf '%s\n' "$want_config" >"$config"
  restart=1
fi
if [ "$(cat "$base/dockerd.args" 2>/dev/null)" != "${engine_args[*]}" ]; then
  restart=1
fi

# shellcheck source=engine-pid.sh
. "$(dirname "$0")/engine-pid.sh"
running_pid=$(engine_pid "$base/dockerd.pid" "$sock")
if [ -n "$running_pid" ] && [ "$restart" = 1 ]; then
  # Only our own engine, by its pid file: the main dockerd is never signalled.
  log "the engine's configuration changed: restarting the gVisor engine (pid $running_pid)"
  kill "$running_pid"
  for _ in $(seq 1 30); do kill -0 "$running_pid" 2>/dev/null || break; sleep 1; done
  running_pid=""
fi

if [ -z "$running_pid" ] || ! gdocker info >/dev/null 2>&1; then
  if [ -z "$running_pid" ]; then
    log "starting the gVisor engine on unix://$sock (log: $dockerd_log)"
    printf '%s' "${engine_args[*]}" >"$base/dockerd.args"
    setsid nohup dockerd "${engine_args[@]}" >>"$dockerd_log" 2>&1 </dev/null &
  fi
  for _ in $(seq 1 60); do
    gdocker info >/dev/null 2>&1 && break
    sleep 1
  done
  gdocker info >/dev/null 2>&1 || { echo "setup-gvisor.sh: the gVisor engine did not answer within 60 s; see $dockerd_log" >&2; exit 1; }
fi
gdocker info --format '{{json .Runtimes}}' | grep -q '"runsc"' \
  || { echo "setup-gvisor.sh: the gVisor engine does not list runsc; see $dockerd_log" >&2; exit 1; }

# The sandbox image: copied from the main engine only when its ID differs (about 12 s).
tag=$(cd "$repo" && python3 -c 'from proctor.sandbox.docker.image import image_tag; print(image_tag())')
main_id=$(docker image inspect --format '{{.Id}}' "$tag" 2>/dev/null) \
  || { echo "setup-gvisor.sh: $tag is not in the main engine: run \`proctor image build\` first" >&2; exit 1; }
gvisor_id=$(gdocker image inspect --format '{{.Id}}' "$tag" 2>/dev/null || true)
if [ "$main_id" != "$gvisor_id" ]; then
  log "loading $tag into the gVisor engine"
  docker save "$tag" | gdocker load -q >/dev/null
fi
log "gVisor ready: $(runsc --version | head -1), engine unix://$sock"
