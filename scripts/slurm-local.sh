#!/usr/bin/env bash
# scripts/slurm-local.sh — a one-node Slurm test cluster on this machine (Debian/Ubuntu, as root),
# for trying slurm/psa.sbatch and slurm/bench.sbatch without a real cluster:
#
#   bash scripts/slurm-local.sh start     # install slurm-wlm + munge if missing, write the config, start the daemons
#   sbatch --wait slurm/psa.sbatch --check tests/data/example.txt
#   bash scripts/slurm-local.sh stop      # stop the daemons this script started
#
# The node is this host with all its CPUs and 90 % of its memory; no systemd is needed (the daemons
# are started directly, which also works in containers). The configuration is a test cluster's:
# MpiDefault=none like most sites, so Open MPI programs need `srun --mpi=pmix` (psa.sbatch adds it);
# process tracking by /proc (no cgroups). It overwrites /etc/slurm/slurm.conf: not for a machine
# that is already part of a cluster.
set -euo pipefail

STATE=/var/lib/psa-slurm-local
CONF=/etc/slurm/slurm.conf

die() { echo "slurm-local.sh: $*" >&2; exit 1; }

start() {
    [ "$(id -u)" -eq 0 ] || die "run as root (it installs packages and starts daemons)"
    if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
        command -v apt-get >/dev/null || die "slurm-wlm and munge are missing and there is no apt-get"
        apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y slurm-wlm munge
    fi
    mkdir -p "$STATE"

    # munge: the key the package made (create one if not), its run directory, the daemon as munge.
    if [ ! -s /etc/munge/munge.key ]; then
        dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
    fi
    chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
    install -d -o munge -g munge -m 0755 /run/munge
    install -d -o munge -g munge -m 0700 /var/log/munge /var/lib/munge
    if ! munge -n </dev/null >/dev/null 2>&1; then
        runuser -u munge -- /usr/sbin/munged
        # Remember which munged this script started: stop ends only that one (a pid from an
        # earlier boot names another process, or none).
        for _ in $(seq 50); do [ -s /run/munge/munged.pid ] && break; sleep 0.1; done
        cp /run/munge/munged.pid "$STATE/munged.ours" 2>/dev/null || true
        for _ in $(seq 50); do munge -n </dev/null >/dev/null 2>&1 && break; sleep 0.1; done
        munge -n </dev/null | unmunge >/dev/null || die "munged does not answer (see /var/log/munge/munged.log)"
    fi

    # slurm.conf: this host, all its CPUs, 90 % of its memory (MB).
    host=$(hostname -s)
    cpus=$(nproc --all)
    mem=$(awk '/^MemTotal:/ { printf "%d\n", $2 / 1024 * 0.9 }' /proc/meminfo)
    install -d -m 0755 /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /etc/slurm
    cat >"$CONF" <<EOF
# One-node test cluster written by scripts/slurm-local.sh.
ClusterName=psa-local
SlurmctldHost=$host
SlurmUser=root
AuthType=auth/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1024
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName=$host CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
    echo "slurm-local.sh: $CONF: node $host, $cpus CPUs, $mem MB"

    # The daemons (they fork into the background; -c: a clean start, no state from an earlier run).
    pgrep -F "$STATE/slurmctld.pid" >/dev/null 2>&1 || slurmctld -c
    pgrep -F "$STATE/slurmd.pid" >/dev/null 2>&1 || slurmd -c
    for _ in $(seq 100); do
        sinfo -h -o %T 2>/dev/null | grep -qx idle && break
        sleep 0.2
    done
    sinfo -h -o %T 2>/dev/null | grep -qx idle || {
        sinfo >&2 || true
        die "the node did not become idle (see /var/log/slurm/slurmctld.log and slurmd.log)"
    }
    sinfo
}

stop() {
    for d in slurmd slurmctld; do
        if pid=$(cat "$STATE/$d.pid" 2>/dev/null) && kill "$pid" 2>/dev/null; then
            echo "slurm-local.sh: stopped $d ($pid)"
        fi
    done
    if pid=$(cat /run/munge/munged.pid 2>/dev/null) && [ "$pid" = "$(cat "$STATE/munged.ours" 2>/dev/null)" ] \
        && kill "$pid" 2>/dev/null; then
        echo "slurm-local.sh: stopped munged ($pid)"
    fi
    rm -f "$STATE/munged.ours"
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    *) sed -n '2,13{s/^# \{0,1\}//;p}' "$0"; exit 2 ;;
esac
