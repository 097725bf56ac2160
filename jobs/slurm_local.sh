#!/usr/bin/env bash
# A single-node Slurm on this machine, for the test slurm_batch (tests/slurm/check_sbatch.sh):
# installs slurm-wlm and munge (apt-get, as root), writes /etc/slurm/slurm.conf for this host
# (one partition, all cores; never over a slurm.conf it did not write), and starts munged,
# slurmctld and slurmd unless a controller already answers. Exit 0 when `sinfo` shows the node
# idle, 1 otherwise. Root only.
set -euo pipefail
if [ "$(id -u)" != 0 ]; then echo "slurm_local.sh: error: run as root" >&2; exit 1; fi
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurm-wlm munge >/dev/null
fi
if timeout 5 sinfo -h >/dev/null 2>&1; then echo "slurm_local.sh: a controller already answers"; exit 0; fi
MARK="# written by linattn jobs/slurm_local.sh"
if [ -e /etc/slurm/slurm.conf ] && ! grep -qxF "$MARK" /etc/slurm/slurm.conf; then
  echo "slurm_local.sh: error: /etc/slurm/slurm.conf exists and is not ours; not touching it" >&2
  exit 1
fi
H=$(hostname -s) NCPU=$(nproc)
MEM=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 * 8 / 10 ))
mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/munge
cat >/etc/slurm/slurm.conf <<CONF
$MARK
ClusterName=local
SlurmctldHost=$H
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
# a requeued job waits cred_expire seconds before it may start again (default 120): 10 here,
# so that the requeue test does not idle for two minutes
AuthInfo=cred_expire=10
# sbatch --wait polls the job at 2, 10, 42, 74, ... s while MinJobAge / 2 (default 300) exceeds
# its interval; at 4 it polls every 2 s (Slurm 22.05 sbatch.c _job_wait), so a 12 s job is seen
# done at 12-14 s instead of 42 s. Finished jobs then leave slurmctld's memory after >= 4 s.
MinJobAge=4
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
NodeName=$H CPUs=$NCPU Sockets=1 CoresPerSocket=$NCPU ThreadsPerCore=1 RealMemory=$MEM State=UNKNOWN
PartitionName=debug Nodes=$H Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
if [ ! -s /etc/munge/munge.key ]; then
  mkdir -p /etc/munge
  dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 2>/dev/null
fi
chown -R munge:munge /etc/munge /run/munge
chmod 400 /etc/munge/munge.key
pgrep -x munged >/dev/null || su -s /bin/sh munge -c /usr/sbin/munged
pgrep -x slurmctld >/dev/null || /usr/sbin/slurmctld
pgrep -x slurmd >/dev/null || /usr/sbin/slurmd
for _ in $(seq 30); do
  if sinfo -h -o %T 2>/dev/null | grep -qx idle; then echo "slurm_local.sh: node $H idle"; exit 0; fi
  sleep 1
done
echo "slurm_local.sh: error: the node did not come up (see /var/log/slurm/)" >&2
exit 1
