#!/usr/bin/env bash
# A real single-node SLURM cluster on this machine (slurmctld + slurmd, MUNGE authentication),
# for the tests and for trying profiles/slurm before a real cluster: Debian's slurm-wlm and
# munge, installed when missing (as root), a generated slurm.conf (one node with this machine's
# CPUs and memory as `slurmd -C` reports them, one partition `main`, no cgroups, no accounting
# database: job states come from squeue, so MinJobAge keeps finished jobs listed for a day).
# The configuration is /etc/slurm/slurm.conf, where every SLURM command (srun inside a job too)
# looks: one that this script did not write is never replaced (exit 2).
#
#   bash scripts/slurm_cluster.sh start [DIR]         # as root; DIR: its state and logs (default /tmp/rerank-slurm)
#   snakemake --profile profiles/slurm --slurm-status-command squeue --slurm-no-account ...
#   bash scripts/slurm_cluster.sh status [DIR]         # sinfo of the cluster; exit 1 when it is down
#   bash scripts/slurm_cluster.sh stop [DIR]           # as root: scontrol shutdown, the munged it started, its slurm.conf
#
# Exit status: 0 done; 1 a failure (its one line on stderr); 2 this machine cannot host one (not
# root, no apt-get and no slurm-wlm, a package that will not install): the tests skip then,
# naming the reason.
set -euo pipefail
verb=${1:-}
DIR=$(realpath -m "${2:-${RERANK_SLURM_DIR:-/tmp/rerank-slurm}}")
CONF=${RERANK_SLURM_CONF:-/etc/slurm/slurm.conf}
HEADER="# written by scripts/slurm_cluster.sh: one node, this machine"
export SLURM_CONF="$CONF"
say() { echo "slurm_cluster: $*" >&2; }
cannot() { say "cannot host a cluster here: $*"; exit 2; }
fail() { say "error: $*"; exit 1; }

up() {  # the node answers and is idle or busy (not down, not drained)
  [ -f "$CONF" ] && head -1 "$CONF" | grep -qF "$HEADER" && sinfo --noheader --format=%T 2>/dev/null | grep -Eq '^(idle|mixed|allocated|completing)'
}

install() {
  if command -v slurmctld > /dev/null && command -v slurmd > /dev/null && command -v munged > /dev/null; then
    return
  fi
  [ "$(id -u)" = 0 ] || cannot "slurm-wlm and munge are not installed and installing them needs root"
  command -v apt-get > /dev/null || cannot "slurm-wlm and munge are not installed and there is no apt-get"
  say "apt-get update: Debian's package lists (under a minute; its log: $DIR/apt.log)"
  apt-get update -q > "$DIR/apt.log" 2>&1 || cannot "apt-get update failed (see $DIR/apt.log)"
  say "apt-get install slurm-wlm munge (1-3 min; every package it unpacks is named below)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurm-wlm munge 2>&1 | tee -a "$DIR/apt.log" \
    | sed -n 's/^Unpacking \([^ ]*\) .*/slurm_cluster:   unpacking \1/p' >&2 \
    || cannot "apt-get install slurm-wlm munge failed (see $DIR/apt.log)"
}

start_munge() {
  if munge -n 2> /dev/null | unmunge > /dev/null 2>&1; then
    return  # a munged is running already (the system's)
  fi
  [ -f /etc/munge/munge.key ] || { mungekey --create 2> /dev/null || dd if=/dev/urandom of=/etc/munge/munge.key bs=128 count=1 status=none; }
  chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
  mkdir -p /run/munge /var/log/munge /var/lib/munge && chown munge:munge /run/munge /var/log/munge /var/lib/munge
  runuser -u munge -- /usr/sbin/munged || fail "munged did not start (see /var/log/munge/munged.log)"
  touch "$DIR/munged.ours"
  for _ in $(seq 50); do munge -n 2> /dev/null | unmunge > /dev/null 2>&1 && return; sleep 0.1; done
  fail "munged does not answer (munge -n | unmunge)"
}

write_conf() {
  local node
  node=$(slurmd -C | head -1)  # NodeName=HOST CPUs=… Boards=… SocketsPerBoard=… CoresPerSocket=… ThreadsPerCore=… RealMemory=…
  [[ $node == NodeName=* ]] || fail "slurmd -C did not describe this machine: $node"
  local host=${node#NodeName=}
  host=${host%% *}
  if [ -f "$CONF" ] && ! head -1 "$CONF" | grep -qF "$HEADER"; then
    cannot "$CONF is this machine's own SLURM configuration (not written by this script): left as it is"
  fi
  mkdir -p "$DIR/state" "$DIR/spool" "$(dirname "$CONF")"
  cat > "$CONF" << EOF
$HEADER
ClusterName=rerank
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
MpiDefault=none
ReturnToService=2
MinJobAge=86400
SlurmctldTimeout=30
SlurmdTimeout=30
$node State=UNKNOWN
PartitionName=main Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
}

case "$verb" in
  start)
    mkdir -p "$DIR"
    if up; then
      say "running already ($CONF)"
      exit 0
    fi
    install
    [ "$(id -u)" = 0 ] || cannot "starting slurmctld and slurmd needs root"
    say "starting munged, MUNGE's authentication daemon (seconds)"
    start_munge
    say "writing $CONF and starting slurmctld and slurmd (seconds; the node comes up within 20 s)"
    write_conf
    slurmctld -f "$CONF" || fail "slurmctld did not start (see $DIR/slurmctld.log)"
    slurmd -f "$CONF" || fail "slurmd did not start (see $DIR/slurmd.log)"
    for _ in $(seq 100); do up && break; sleep 0.2; done
    if ! up; then  # a node left down by an earlier run of another configuration
      scontrol update nodename=ALL state=resume > /dev/null 2>&1 || true
      for _ in $(seq 50); do up && break; sleep 0.2; done
    fi
    up || fail "the node did not come up (sinfo: $(sinfo --noheader 2>&1 | head -1); see $DIR/slurmctld.log)"
    say "up: $(sinfo --noheader --format='%P %D node(s), %c CPUs, %m MB, %T') ($CONF, state in $DIR)"
    ;;
  status)
    up || { say "not running ($CONF)"; exit 1; }
    sinfo
    ;;
  stop)
    if [ -f "$CONF" ] && head -1 "$CONF" | grep -qF "$HEADER"; then
      scontrol shutdown > /dev/null 2>&1 || true
      for _ in $(seq 50); do pgrep -f "slurm(ctld|d) -f $CONF" > /dev/null || break; sleep 0.2; done
      pkill -f "slurm(ctld|d) -f $CONF" 2> /dev/null || true
      # a configuration left naming a stopped controller makes every scontrol wait 9 s for it, and
      # snakemake runs one at every start (the SLURM plugin reads MinJobAge): it goes with the cluster
      rm -f "$CONF"
    fi
    if [ -f "$DIR/munged.ours" ]; then
      pkill -x munged 2> /dev/null || true
      rm -f "$DIR/munged.ours"
    fi
    say "stopped"
    ;;
  *)
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
    [ "$verb" = --help ] || [ "$verb" = -h ]
    ;;
esac
