#!/usr/bin/env bash
# Measures the rehearsal platform's bring-up with images already built (issue goal: one
# node in <= 30 s) and a 3-node fleet, then a cold deploy to ready on one node with the
# simulator's test time scale. Prints figures; asserts nothing. Leaves the platform down.
# Usage: benchmarks/platform_bringup.sh
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
export PATH="$REPO/.venv/bin:$PATH" LANG=C.UTF-8 ANSIBLE_CONFIG="$REPO/ansible.cfg"
platform=tests/rehearsal/platform

$platform build >/dev/null
$platform down >/dev/null 2>&1

seconds() { local start=$SECONDS; "$@" >/dev/null 2>&1; echo $((SECONDS - start)); }

one=$(seconds $platform up 1)
fleet=$(seconds $platform node-up bench-node-2 bench-node-3)
image=$($platform env | sed -n 's/^IMG=//p')
pull=$(seconds docker exec infera-node-1 docker pull -q "$image")
deploy=$(seconds ansible-playbook playbooks/deploy_mixed.yml -e conc=64 -e '{"infera_extra_env": {"INFERA_SIM_TIME_SCALE": "0.02"}}')
$platform node-down bench-node-2 bench-node-3 >/dev/null
$platform down >/dev/null

printf 'platform bring-up (images present, %s, %s cores)\n' "$(date -u +%Y-%m-%d)" "$(nproc)"
printf '  %-52s %4s s\n' "registry + etcd + 1 node (platform up 1)" "$one" \
    "2 more nodes (node-up, fleet of 3)" "$fleet" \
    "engine image pull inside a node (registry path)" "$pull" \
    "deploy_mixed.yml to ready + verify (SIMULATED, 0.02)" "$deploy"
