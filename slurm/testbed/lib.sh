# shellcheck shell=bash
# shellcheck disable=SC2034  # the settings below are used by the scripts that source this file
# Shared settings and helpers for slurm/testbed/{up,down,status}. Sourced, never run.
#
# The testbed is a real single-node Slurm (Debian's slurm-wlm 22.05) with job accounting
# (slurmdbd backed by a private MariaDB), started as plain daemons because containers have no
# systemd. Everything it writes lives under $TESTBED_DIR so `down` can remove it; the only files
# outside are two symlinks in /etc/slurm (so sinfo/sbatch/sacct and submitit find the config
# without SLURM_CONF) and munge's socket directory.

set -euo pipefail

TESTBED_DIR="${SCALERL_TESTBED_DIR:-/var/lib/scalerl-testbed}"
CLUSTER_NAME="${SCALERL_TESTBED_CLUSTER:-scalerl}"
# A private MariaDB port, so the testbed never collides with a MariaDB the machine already runs.
DB_PORT="${SCALERL_TESTBED_DB_PORT:-3316}"
DEFAULT_PARTITION="debug"
URGENT_PARTITION="urgent"

CONF_DIR="$TESTBED_DIR/etc"
RUN_DIR="$TESTBED_DIR/run"
LOG_DIR="$TESTBED_DIR/log"
DB_DIR="$TESTBED_DIR/mysql"
# mariadbd runs as mysql and can only write inside its own data directory.
DB_SOCKET="$DB_DIR/mysqld.sock"
DB_LOG="$DB_DIR/mariadbd.err"
MUNGE_RUN_DIR="/run/munge"
MUNGE_SOCKET="$MUNGE_RUN_DIR/munge.socket.2"
ETC_SLURM="/etc/slurm"
# Daemons read the generated config through SLURM_CONF; slurmdbd finds slurmdbd.conf beside it.
export SLURM_CONF="$CONF_DIR/slurm.conf"

APT_PACKAGES=(munge slurm-wlm slurmdbd mariadb-server)

log() { printf 'testbed: %s\n' "$*" >&2; }

die() {
  printf 'testbed: ERROR: %s\n' "$*" >&2
  exit 1
}

require_root() {
  if [[ "$(id -u)" != "0" ]]; then
    die "must run as root (uid 0, you are uid $(id -u)): it installs packages with apt-get and \
starts munged, mariadbd, slurmdbd, slurmctld and slurmd, which need root. Run: sudo $0"
  fi
}

# Install the Debian packages the testbed needs when any of their programs is missing.
ensure_packages() {
  local missing=0 prog
  for prog in munged slurmctld slurmd slurmdbd sinfo sacct sacctmgr mariadbd mariadb-install-db; do
    if ! command -v "$prog" >/dev/null 2>&1 && [[ ! -x "/usr/sbin/$prog" ]]; then
      log "missing program: $prog"
      missing=1
    fi
  done
  [[ "$missing" == "0" ]] && return 0
  command -v apt-get >/dev/null 2>&1 \
    || die "Slurm programs are missing and apt-get is not available (not a Debian/Ubuntu machine); \
install ${APT_PACKAGES[*]} with this system's package manager"
  log "installing ${APT_PACKAGES[*]} with apt-get (this takes a minute)"
  export DEBIAN_FRONTEND=noninteractive
  # The package scripts try to start services; in a container without systemd/init that fails
  # harmlessly, so a policy-rc.d that forbids starting keeps apt-get's exit status clean.
  local policy=/usr/sbin/policy-rc.d created_policy=0
  if [[ ! -e "$policy" ]]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && created_policy=1
  fi
  if ! apt-get install -y --no-install-recommends "${APT_PACKAGES[@]}" </dev/null >"/tmp/scalerl-testbed-apt.log" 2>&1; then
    apt-get update </dev/null >>"/tmp/scalerl-testbed-apt.log" 2>&1 || true
    apt-get install -y --no-install-recommends "${APT_PACKAGES[@]}" </dev/null >>"/tmp/scalerl-testbed-apt.log" 2>&1 \
      || { [[ "$created_policy" == 1 ]] && rm -f "$policy"; die "apt-get install ${APT_PACKAGES[*]} failed; see /tmp/scalerl-testbed-apt.log"; }
  fi
  [[ "$created_policy" == 1 ]] && rm -f "$policy"
  return 0
}

# pid_alive PIDFILE: true when the file names a live process.
pid_alive() {
  local pidfile="$1" pid
  [[ -s "$pidfile" && -r "$pidfile" ]] || return 1
  pid="$(tr -dc '0-9' <"$pidfile")"
  # /proc rather than kill -0, which fails for other users' processes when status runs unprivileged.
  [[ -n "$pid" && -d "/proc/$pid" ]]
}

# stop_pidfile NAME PIDFILE: TERM, wait up to 15 s, then KILL; only the process the file names.
stop_pidfile() {
  local name="$1" pidfile="$2" pid
  if ! pid_alive "$pidfile"; then
    rm -f "$pidfile"
    return 0
  fi
  pid="$(tr -dc '0-9' <"$pidfile")"
  log "stopping $name (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 30); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
  done
  if kill -0 "$pid" 2>/dev/null; then
    log "$name did not stop after 15 s; sending KILL"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$pidfile"
}

# All five daemons the testbed started are alive (sinfo alone lags: a dead slurmd stays "idle"
# until SlurmdTimeout passes).
daemons_alive() {
  pid_alive "$MUNGE_RUN_DIR/munged.pid" && pid_alive "$DB_DIR/mariadbd.pid" \
    && pid_alive "$RUN_DIR/slurmdbd.pid" && pid_alive "$RUN_DIR/slurmctld.pid" \
    && pid_alive "$RUN_DIR/slurmd.pid"
}

munge_works() { munge -n -S "$MUNGE_SOCKET" 2>/dev/null | unmunge -S "$MUNGE_SOCKET" >/dev/null 2>&1; }

db_works() { mariadb --socket="$DB_SOCKET" -uroot -e 'SELECT 1' >/dev/null 2>&1; }

# The node line as sinfo prints it: "<state>" for the testbed's node, empty when unreachable.
node_state() { { timeout 10 sinfo -h -N -o '%T' 2>/dev/null || true; } | head -n 1; }

sacct_works() { timeout 10 sacct -n -X -S now-1minutes -o JobID >/dev/null 2>&1; }
