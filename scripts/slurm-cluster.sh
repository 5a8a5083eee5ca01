#!/usr/bin/env bash
# A real two-node Slurm cluster on this one machine, for the Slurm tests and the README's example:
# two slurmd (n1, n2) beside slurmctld, cgroup v1 memory enforcement, full accounting (slurmdbd
# with MariaDB, so sacct shows steps and DerivedExitCode). No systemd: every daemon is started here
# and stopped by the pid in its pid file. Idempotent. Needs root (slurmd runs as root).
#   scripts/slurm-cluster.sh install   Debian packages (apt-get), when missing
#   scripts/slurm-cluster.sh start     configure and start (or find it running); waits until idle
#   scripts/slurm-cluster.sh stop      stop every daemon by pid
#   scripts/slurm-cluster.sh status
set -euo pipefail

CLUSTER=firedup
HOST=$(hostname)
CONF=/etc/slurm
RUN=/run/slurm
SPOOL=/var/spool
LOGS=/var/log/slurm
DB_PASS=firedup-slurm-test
PIDS=(/run/slurm/slurmd-n2.pid /run/slurm/slurmd-n1.pid /run/slurm/slurmctld.pid /run/slurm/slurmdbd.pid
      /run/mysqld/mysqld.pid /run/munge/munged.pid)
PACKAGES=(slurmctld slurmd slurm-client munge slurmdbd mariadb-server)

say() { echo "slurm-cluster: $*" >&2; }

alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

wait_for() {  # seconds, description, command...
  local deadline=$((SECONDS + $1)) what=$2; shift 2
  until "$@" >/dev/null 2>&1; do
    if [ $SECONDS -ge $deadline ]; then say "timed out waiting for $what"; return 1; fi
    sleep 0.2
  done
}

install() {
  local missing=()
  for p in "${PACKAGES[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
}

configure() {
  mkdir -p "$CONF" "$RUN" "$SPOOL/slurmctld" "$LOGS" /run/munge /run/mysqld
  chown slurm:slurm "$RUN" "$SPOOL/slurmctld" "$LOGS"
  chown munge:munge /run/munge
  chown mysql:mysql /run/mysqld
  cat >"$CONF/slurm.conf" <<EOF
# Written by firedup's scripts/slurm-cluster.sh: two nodes on one host.
ClusterName=$CLUSTER
SlurmctldHost=$HOST
SlurmUser=slurm
AuthType=auth/munge
# A requeued job waits cred_expire seconds before it starts again (default 120).
AuthInfo=cred_expire=10
StateSaveLocation=$SPOOL/slurmctld
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmctldLogFile=$LOGS/slurmctld.log
SlurmdPidFile=$RUN/slurmd-%n.pid
SlurmdSpoolDir=$SPOOL/slurmd-%n
SlurmdLogFile=$LOGS/slurmd-%n.log
SlurmdParameters=config_overrides
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=3000
ProctrackType=proctrack/cgroup
TaskPlugin=task/cgroup
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=5
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
JobCompType=jobcomp/none
# Failures show within seconds; a node that comes back rejoins.
ReturnToService=2
SlurmdTimeout=10
KillWait=5
OverTimeLimit=0
MinJobAge=300
InactiveLimit=0
SchedulerType=sched/backfill
NodeName=n[1-2] NodeHostname=$HOST NodeAddr=127.0.0.1 Port=17001-17002 CPUs=8 CoresPerSocket=8 ThreadsPerCore=1 RealMemory=10000
PartitionName=debug Nodes=n[1-2] Default=YES MaxTime=INFINITE State=UP
EOF
  cat >"$CONF/cgroup.conf" <<EOF
CgroupPlugin=cgroup/v1
ConstrainRAMSpace=yes
ConstrainSwapSpace=yes
EOF
  cat >"$CONF/slurmdbd.conf" <<EOF
AuthType=auth/munge
DbdHost=localhost
SlurmUser=slurm
PidFile=$RUN/slurmdbd.pid
LogFile=$LOGS/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageLoc=slurm_acct_db
StorageUser=slurm
StoragePass=$DB_PASS
EOF
  chown slurm:slurm "$CONF/slurmdbd.conf"
  chmod 600 "$CONF/slurmdbd.conf"
}

start() {
  if alive /run/slurm/slurmd-n1.pid && alive /run/slurm/slurmd-n2.pid && alive /run/slurm/slurmctld.pid \
      && sinfo -h >/dev/null 2>&1; then
    say "already running"; return 0
  fi
  configure
  alive /run/munge/munged.pid || runuser -u munge -- /usr/sbin/munged
  if ! alive /run/mysqld/mysqld.pid; then
    [ -d /var/lib/mysql/mysql ] || mariadb-install-db --user=mysql >/dev/null
    runuser -u mysql -- /usr/sbin/mariadbd --bind-address=127.0.0.1 --socket=/run/mysqld/mysqld.sock \
      --pid-file=/run/mysqld/mysqld.pid --log-error=/var/log/slurm/mariadb.log </dev/null >/dev/null 2>&1 &
    wait_for 60 mariadb mariadb -e 'select 1'
  fi
  mariadb -e "CREATE DATABASE IF NOT EXISTS slurm_acct_db;
    CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$DB_PASS';
    GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';"
  if ! alive /run/slurm/slurmdbd.pid; then
    /usr/sbin/slurmdbd
    wait_for 30 slurmdbd sacctmgr -n list cluster
  fi
  sacctmgr -n list cluster format=cluster | grep -qw "$CLUSTER" || sacctmgr -i add cluster "$CLUSTER" >/dev/null
  alive /run/slurm/slurmctld.pid || /usr/sbin/slurmctld
  wait_for 30 slurmctld scontrol ping
  for n in n1 n2; do
    mkdir -p "$SPOOL/slurmd-$n"
    alive "$RUN/slurmd-$n.pid" || /usr/sbin/slurmd -N "$n"
  done
  # A node left DOWN by an earlier test's SIGKILL comes back by itself (ReturnToService=2), once it answers.
  wait_for 60 "both nodes idle" bash -c '[ "$(sinfo -h -N -o %T | sort -u)" = idle ]'
  say "running: $(sinfo -h -o '%P %D %T %N')"
}

stop() {
  for f in "${PIDS[@]}"; do
    if alive "$f"; then
      local pid; pid=$(cat "$f")
      kill "$pid"
      for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
    fi
    rm -f "$f"
  done
  say "stopped"
}

case "${1:-}" in
  install) install ;;
  start) start ;;
  stop) stop ;;
  status) for f in "${PIDS[@]}"; do alive "$f" && echo "$f $(cat "$f") running" || echo "$f stopped"; done ;;
  *) echo "usage: $0 install|start|stop|status" >&2; exit 2 ;;
esac
