#!/usr/bin/python
# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
module: node_preflight
short_description: Check that a node can take the SGLang worker, and return every problem found
version_added: 0.1.0
description:
  - Runs read-only checks on an MI355X node before anything is deployed and returns every problem it finds, each as
    the check's name and one line naming the cause and the next step. It never stops at the first problem, so one
    run shows everything to fix. The task itself fails only on a bad argument; the role C(infera.serving.preflight)
    gathers the results of all nodes, prints them and decides.
  - C(docker) - the Docker engine answers C(GET /_ping) on O(docker_socket).
  - C(devices) - C(/dev/kfd) exists and C(/dev/dri) has at least O(render_nodes) C(renderD*) nodes.
  - C(gpus) - every GPU has at most O(vram_max_percent) of its VRAM in use, read with
    C(amd-smi metric --mem-usage --json), else C(amd-smi monitor --vram-usage --json), else
    C(rocm-smi --showmeminfo vram --json) (on the PATH or in C(/opt/rocm/bin)); the tool must list at least
    O(render_nodes) GPUs. Busy GPUs are fine when every process holding C(/dev/kfd) or a render node runs inside
    O(container) (a redeploy restarts our own engine); otherwise the message names the busy GPUs, their use, and
    the processes holding the devices.
  - A node with only the amdgpu driver has no such tool, but the engine image O(image) has C(/opt/rocm/bin/amd-smi).
    When the node has no tool and the image is on it, the check fails and RV(image_smi) describes a one-shot
    container that runs the image's amd-smi with the GPU devices. Run it with C(community.docker.docker_container)
    and run this module again with its result as O(image_smi_run); the same parser then judges that output, and
    C(details.gpus.source) names the image. The role C(infera.serving.preflight) does both. When the image is not on
    the node yet (the preflight runs before the pull), the message names both remedies (install amd-smi on the node,
    or pull the image first).
  - C(model) - O(model_path) has a C(config.json) whose C(model_type) is one of O(model_types), a C(tokenizer.json)
    that resolves (a Hugging Face cache snapshot links into C(blobs/); a dangling link means an interrupted or
    pruned download), and no C(*.safetensors) file that does not resolve.
  - C(disk) - the Docker data root (O(docker_data_root), else what the engine reports, else C(/var/lib/docker))
    has at least O(min_free_gib) GiB free.
  - C(ports) - each of O(ports) is free, or held by a process inside O(container). Listening sockets come from
    C(/proc/net/tcp) and C(/proc/net/tcp6), their holders from C(/proc/*/fd); a process is inside the container
    when its pid namespace is that of the container's init process (C(State.Pid) from the engine). A foreign
    holder is named with its pid and command line.
  - C(etcd) - C(GET <etcd_endpoint>/health) answers with C(health) V(true), asked without a proxy. An unhealthy
    answer is asked again every half second for O(etcd_wait) seconds before the check fails.
  - C(image) - O(image) is present in the engine, or its registry answers C(GET /v2/) (https, then http for an
    insecure registry; 401 counts as an answer). An image from Docker Hub that is not present passes; it will be
    pulled.
  - A check whose input is not given (O(model_path), O(ports), O(etcd_endpoint), O(image)) is skipped and listed
    in RV(skipped); so is C(image) when the engine does not answer.
author:
  - Infera serving maintainers (@infera)
extends_documentation_fragment:
  - infera.serving._attributes
  - infera.serving._attributes.read_only
options:
  docker_socket:
    description: The Docker engine's unix socket.
    type: path
    default: /var/run/docker.sock
  render_nodes:
    description: How many C(/dev/dri/renderD*) nodes, and GPUs listed by amd-smi or rocm-smi, the node must have at least.
    type: int
    default: 8
  vram_max_percent:
    description: The most VRAM, in percent of each GPU's total, that may be in use for the GPU to count as idle.
    type: float
    default: 10.0
  model_path:
    description: The checkpoint directory on the node (C($MODEL)). Without it the C(model) check is skipped.
    type: path
  model_types:
    description: The C(model_type) values C(config.json) may have.
    type: list
    elements: str
    default: [deepseek_v4]
  docker_data_root:
    description:
      - The directory whose filesystem must have O(min_free_gib) free.
      - Defaults to the engine's C(DockerRootDir), or C(/var/lib/docker) when the engine does not answer.
    type: path
  min_free_gib:
    description: Free space, in GiB, the Docker data root needs at least.
    type: float
    default: 50.0
  ports:
    description: TCP ports that must be free or held by O(container). Without any the C(ports) check is skipped.
    type: list
    elements: int
    default: []
  container:
    description:
      - The worker container's name. Processes inside it may hold O(ports) and the GPUs.
      - Without it, or when it does not run, every holder is foreign.
    type: str
  etcd_endpoint:
    description: The etcd endpoint, such as V(http://10.0.0.5:2379). Without it the C(etcd) check is skipped.
    type: str
  etcd_wait:
    description:
      - Seconds an etcd that answers unhealthy (HTTP 503) is asked again before the check fails. A member whose
        disk is slow to sync answers 503 for a moment. An etcd that does not answer at all fails at once.
    type: float
    default: 10.0
  image:
    description:
      - The engine image reference (C($IMG)). Without it the C(image) check is skipped.
      - On a node without amd-smi or rocm-smi, the C(gpus) check reads VRAM use with this image's amd-smi.
    type: str
  image_smi_run:
    description:
      - What C(community.docker.docker_container) returned (registered whole) when it ran the container RV(image_smi)
        described, with O(community.docker.docker_container#module:detach=false) and
        O(community.docker.docker_container#module:cleanup=true). Its C(container.Output) (stdout and stderr) is judged
        instead of running a tool on the node; C(status) is the exit code, C(msg) Docker's error when the container
        could not start.
      - Needs O(image), the image it ran.
    type: dict
  timeout:
    description: Seconds each HTTP request (Docker engine, etcd, registry) may take.
    type: float
    default: 5.0
  node:
    description: The name the result gives the node. Defaults to the machine's hostname.
    type: str
notes:
  - Run it as root (C(become=true)). Other users' C(/proc/<pid>/fd) are readable only by root, so without it a
    port's or a GPU's holder cannot be named, and the message says so.
  - The GPU checks need amd-smi or rocm-smi on the node, or the engine image (O(image)) on the node, whose amd-smi
    is run in a container (O(image_smi_run)). Nothing else beyond Python's standard library and Ansible's own module
    utilities is needed.
requirements:
  - Python 3 on the node.
seealso:
  - module: infera.serving.sglang_ready
"""

EXAMPLES = r"""
- name: Preflight | Check the node
  infera.serving.node_preflight:
    model_path: /mnt/hf-cache/hub/models--deepseek-ai--DeepSeek-V4-Pro/snapshots/main
    etcd_endpoint: http://10.0.0.5:2379
    image: registry.example.com/infera/sglang-rocm:dsv4-mi355x
    ports: [8000, 30000]
    container: sgl_mix
    node: "{{ inventory_hostname }}"
  register: _node_preflight
  become: true

- name: Preflight | Only the GPUs and the disk, with tighter limits
  infera.serving.node_preflight:
    vram_max_percent: 2
    min_free_gib: 200
"""

RETURN = r"""
ready:
  description: Whether every check that ran passed (RV(failures) is empty).
  returned: success
  type: bool
  sample: false
failures:
  description: One entry per problem, in check order; C(check) is the check's name, C(message) one line naming the cause and the next step.
  returned: success
  type: list
  elements: dict
  sample:
    - check: ports
      message: >-
        port 8000 is held by pid 4242 (python3 -m http.server 8000) outside the container sgl_mix;
        next step: stop it (kill 4242) or free port 8000, then rerun
lines:
  description: "RV(failures) as the role prints them, one line each: C(<node>: preflight <check>: <message>)."
  returned: success
  type: list
  elements: str
  sample:
    - >-
      mi355x-07: preflight gpus: GPU 3 (85.0%, 250661 of 294896 MiB) has more than 10% of its VRAM in use
      (`amd-smi metric --mem-usage --json`); held by pid 4242 (python3 train.py) outside the container sgl_mix;
      next step: stop it (kill 4242) or wait for it to finish, then rerun
passed:
  description: The checks that ran and found nothing.
  returned: success
  type: list
  elements: str
  sample: [docker, devices, gpus, model, disk, etcd, image]
skipped:
  description: The checks that did not run, each with C(check) and C(reason).
  returned: success
  type: list
  elements: dict
  sample: [{check: image, reason: "the Docker engine does not answer (see the docker check)"}]
details:
  description:
    - What the checks found, by check. C(docker) (C(socket), C(server_version), C(root_dir)); C(devices) (C(kfd),
      C(render_nodes)); C(gpus) (C(source), the command read; C(gpus), each with C(index), C(used_mib), C(total_mib),
      C(used_percent); C(held_by_container)); C(model) (C(path), C(model_type), C(tokenizer), resolved); C(disk)
      (C(path), C(free_gib), C(min_free_gib)); C(ports) (a list, each with C(port), C(free), C(holders), C(ours));
      C(etcd) (C(endpoint), C(status), C(answer), C(asked), how many times it was asked); C(image) (C(image),
      C(present), C(id) or C(registry) and C(registry_answer)). A reading with the image's amd-smi has a C(source)
      such as C(amd-smi metric --mem-usage --json (in rocm/infera:sglang-v0.1.1)).
    - A check that could not look (the tool is missing, the engine does not answer) leaves its entry out.
  returned: success
  type: dict
  sample:
    gpus:
      source: amd-smi metric --mem-usage --json
      gpus: [{index: 0, used_mib: 283.0, total_mib: 294896.0, used_percent: 0.1}]
      held_by_container: null
    disk: {path: /var/lib/docker, free_gib: 812.4, min_free_gib: 50.0}
image_smi:
  description:
    - Set when the node has no amd-smi or rocm-smi and O(image) is on the node (the C(gpus) check then fails). The
      one-shot container that reads VRAM use with the image's amd-smi, as C(community.docker.docker_container)
      options C(name), C(image), C(entrypoint), C(command) and C(devices), and C(source), what
      C(details.gpus.source) will say. Run it and pass the result as O(image_smi_run).
    - V(null) otherwise.
  returned: success
  type: dict
  sample:
    name: infera-preflight-amd-smi
    image: rocm/infera:sglang-v0.1.1
    entrypoint: [timeout, "60", /opt/rocm/bin/amd-smi]
    command: [metric, --mem-usage, --json]
    devices: [/dev/kfd, /dev/dri]
    source: amd-smi metric --mem-usage --json (in rocm/infera:sglang-v0.1.1)
address:
  description:
    - The node's default IPv4 address, found as Ansible finds C(ansible_default_ipv4.address) (the source address of
      the node's route to 8.8.8.8), or an empty string when it has no such route. Not a check; the deploy uses it as
      the address the worker registers under when the inventory sets no C(infera_advertise_host).
  returned: success
  type: str
  sample: 10.0.0.11
node:
  description: The node name, from O(node) or the machine's hostname.
  returned: success
  type: str
  sample: mi355x-07
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.infera.serving.plugins.module_utils._errors import run_or_fail
from ansible_collections.infera.serving.plugins.module_utils._preflight import ARGUMENT_SPEC, run_preflight


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)

    result = run_or_fail(module, run_preflight)
    module.exit_json(changed=False, **result)


if __name__ == '__main__':
    main()
