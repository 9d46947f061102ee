#!/usr/bin/env bash
# An Open MPI launch agent that plays every host of `mpirun -H` on this one machine, so that the code paths
# of a job spread over several machines run without them: ranks on different hosts get their own local
# ranks (MPI_COMM_TYPE_SHARED splits by host), their own GPUs and a network transport between them.
#
# Open MPI starts a daemon on each remote host by running "<agent> <host> <daemon command>" (the agent is
# ssh by default). This one runs the command here instead, with the host's name in MINIDET_LOCAL_HOST and:
#   CUDA_VISIBLE_DEVICES  the host's GPUs, from LOCAL_HOSTS_GPUS="a=0,1 b=2,3" (unset: every GPU), so that
#                         local rank r of each host opens a different card, as on separate machines
#   NCCL_HOSTID           the host's name, so NCCL treats the hosts as different machines (its network
#                         transport between them, shared memory and NVLink within one)
# The host names must not resolve to this machine (Open MPI would start those ranks itself, without the
# agent), and the shared-memory transport cannot span the pretend hosts: give `--mca btl self,tcp`. Give
# `--mca plm rsh` too where the environment selects another launcher (containers set OMPI_MCA_plm=isolated,
# which starts ranks on this machine only and then finds the hosts "already filled"). Where this machine's
# network address does not answer itself (a sandbox), keep Open MPI and NCCL on the loopback:
# `--mca oob_tcp_if_include lo --mca btl_tcp_if_include lo -x NCCL_SOCKET_IFNAME=lo`.
#
#   LOCAL_HOSTS_GPUS="a=0,1 b=2,3" mpirun -np 4 -H a:2,b:2 --mca plm rsh --mca plm_rsh_agent \
#     scripts/local-hosts-agent.sh --mca plm_rsh_no_tree_spawn 1 --mca btl self,tcp build/gpu/examples/minidet/minidet train ...
# (the agent runs in mpirun's environment, and the daemons and ranks in the agent's).
set -euo pipefail
host=$1
shift
export MINIDET_LOCAL_HOST=$host NCCL_HOSTID=$host
# Its own temporary folder, as on a machine of its own: Open MPI keeps each node's session files there
# (the daemon's topology in shared memory, PMIx's stores), and two daemons sharing one folder race on them.
export TMPDIR="${TMPDIR:-/tmp}/local-hosts.$host"
mkdir -p "$TMPDIR"
for entry in ${LOCAL_HOSTS_GPUS:-}; do
  [[ ${entry%%=*} == "$host" ]] && export CUDA_VISIBLE_DEVICES=${entry#*=}
done
exec /bin/sh -c "$*"
