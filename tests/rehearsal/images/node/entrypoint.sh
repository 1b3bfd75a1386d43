#!/bin/sh
# Make the node look like an 8-GPU MI355X host with 8 RDMA ports to the seed's `docker run --device=...`
# (char 1:3 nodes: the default device cgroup allows them), then run dockerd (under the init the
# platform starts nodes with, `docker run --init`, which reaps orphaned processes as a real node's init does).
set -eu
gpus="${INFERA_NODE_GPUS:-8}"
rdma_ports="${INFERA_NODE_RDMA_PORTS:-8}"
[ -e /dev/kfd ] || mknod -m 666 /dev/kfd c 1 3
mkdir -p /dev/dri
i=0
while [ "$i" -lt "$gpus" ]; do
    node="/dev/dri/renderD$((128 + i))"
    [ -e "$node" ] || mknod -m 666 "$node" c 1 3
    i=$((i + 1))
done
chgrp render /dev/kfd /dev/dri/renderD* 2>/dev/null || true
# SIMULATED RDMA (no NIC): /dev/infiniband/uverbs0..N-1, one per ionic port (N = INFERA_NODE_RDMA_PORTS; the engine
# image's SIMULATED ibv_devinfo lists one HCA per uverbs node it is given), and rdma_cm, which a real host has
# whenever its RDMA stack is loaded. rdma_cm keeps `docker run --device=/dev/infiniband` working with 0 ports:
# Docker refuses a --device directory holding no device ("error gathering device information"); there
# ibv_devinfo says "No IB devices found". A node without RDMA at all: rm -rf /dev/infiniband.
mkdir -p /dev/infiniband
[ -e /dev/infiniband/rdma_cm ] || mknod -m 666 /dev/infiniband/rdma_cm c 1 3
i=0
while [ "$i" -lt "$rdma_ports" ]; do
    node="/dev/infiniband/uverbs$i"
    [ -e "$node" ] || mknod -m 666 "$node" c 1 3
    i=$((i + 1))
done
# sshd for the nodes reached like real ones (platform ssh-inventory); it daemonizes under the init.
mkdir -p /run/sshd
/usr/sbin/sshd
set -- --host=unix:///var/run/docker.sock
if [ -n "${INFERA_NODE_INSECURE_REGISTRY:-}" ]; then
    set -- "$@" --insecure-registry "$INFERA_NODE_INSECURE_REGISTRY"
fi
exec dockerd "$@"
