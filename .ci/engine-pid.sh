# Sourced by setup-gvisor.sh and setup-ray.sh: the one check of an extra engine's pid file.
#
# engine_pid PIDFILE SOCKET prints the pid recorded in PIDFILE when that process serves SOCKET,
# and prints nothing otherwise. A pid file can outlive its engine (a restarted machine, a killed
# dockerd), and its number can then belong to any process, so a file whose process is not ours is
# removed: dockerd refuses to start beside a pid file whose number is alive.
engine_pid() {
  local pidfile=$1 sock=$2 pid
  [ -f "$pidfile" ] || return 0
  pid=$(cat "$pidfile")
  if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "unix://$sock"; then
    printf '%s\n' "$pid"
  else
    rm -f "$pidfile"
  fi
}
