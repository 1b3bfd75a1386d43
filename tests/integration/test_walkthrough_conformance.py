"""Conformance: what the collection runs on a node is the walkthrough, flag by flag.

Everything expected is parsed from the walkthrough's text (docs/reference copy), never
from the collection's recipe or templates, and compared with what really runs:
`docker inspect` of the worker container against the walkthrough's `docker run`, the
running wrapper's /proc cmdline and environ against that variant's command line and the
lever block, the router's cmdline against the router command, and the bench command a
sweep point ran against the walkthrough's bench loop with C substituted. Only the
differences listed in ALLOWED may appear; any other is printed.
"""

import json
import re
import shlex
import subprocess
from collections import Counter

import pytest

from rehearsal import REPO, Node, Walkthrough, platform_up, playbook_env

# The rehearsal nodes this file's tests use (tests/conftest.py schedules by it).
pytestmark = pytest.mark.nodes('node-1')

CONTAINER = "sgl_mix"
WORK_DIR = "/var/lib/infera/sgl_mix"
LENGTHS = {"sweep_random_input_len": 64, "sweep_random_output_len": 8}
# What the collection may do differently from the text, and why.
ALLOWED = {
    "bind": f"{WORK_DIR}:{WORK_DIR}",  # launch scripts, logs and results (the walkthrough pastes instead)
    "bench_flags": {
        "--random-input-len": "shortened for the rehearsal",
        "--random-output-len": "shortened for the rehearsal",
        "--dataset-path": "staged dataset: the client would download ShareGPT",
        "--output-file": "same file name, in the run's results directory",
    },
    "env_prefixes": ("INFERA_ENGINE_READY_TIMEOUT", "INFERA_DRAIN_TIMEOUT", "INFERA_SIM_"),
    # The image's Infera (v0.1.1) has no drain: the collection's reads the engine's /metrics (_stack.py engine_flags).
    "worker_flags": {"--enable-metrics": "the collection's drain reads the engine's /metrics"},
}
LEVER_PREFIXES = ("SGLANG_", "AITER_", "HIP_")


@pytest.fixture(scope="module")
def platform():
    return platform_up(1)


@pytest.fixture(scope="module")
def node(platform):
    node = Node(platform["NODES"].split()[0])
    node.remove_worker_container(CONTAINER)
    yield node
    node.remove_worker_container(CONTAINER)


@pytest.fixture(scope="module")
def text():
    return Walkthrough.load()


@pytest.fixture(scope="module")
def values(platform, node):
    """The shell variables section 2 asks the reader to export, as on this node."""
    return {"IMG": platform["IMG"], "HF_CACHE": platform["HF_CACHE"], "MODEL": platform["MODEL"],
            "HOST": node.address, "ETCD": platform["ETCD"]}


def playbook(*args):
    result = subprocess.run(["ansible-playbook", "--limit", "infera-node-1", *args], cwd=REPO, env=playbook_env(), capture_output=True, text=True,
                            timeout=900, check=False)
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]


def expand(line, values):
    """The shell's expansions the walkthrough uses: $((C*10)), ${C}, $VAR, "$VAR"."""
    line = re.sub(r"\$\(\((\w+)\*(\d+)\)\)", lambda m: str(int(values[m.group(1)]) * int(m.group(2))), line)
    return re.sub(r"\$\{?(\w+)\}?", lambda m: str(values[m.group(1)]), line)


def flag_pairs(tokens):
    """[(flag, (values...))] of a command's arguments, in order."""
    pairs = []
    for token in tokens:
        if token.startswith("--"):
            flag, _sep, inline = token.partition("=")
            pairs.append((flag, (inline,) if inline else ()))
        elif pairs:
            pairs[-1] = (pairs[-1][0], pairs[-1][1] + (token,))
    return pairs


def compare_pairs(what, expected, actual, allowed=()):
    """Differences between two flag lists, except for flags in allowed."""
    want = Counter(pair for pair in expected if pair[0] not in allowed)
    have = Counter(pair for pair in actual if pair[0] not in allowed)
    return ([f"{what}: missing {flag} {' '.join(vals)}" for (flag, vals) in want - have]
            + [f"{what}: extra {flag} {' '.join(vals)}" for (flag, vals) in have - want])


def in_container(node, script):
    return node.in_container(CONTAINER, script).stdout


def process_argv_env(node, pattern):
    pid = in_container(node, f"pgrep -f -- '{pattern}'").split()
    assert len(pid) == 1, f"expected one process matching {pattern!r}, found {pid}"
    argv = in_container(node, f"cat /proc/{pid[0]}/cmdline").split("\0")[:-1]
    environ = dict(item.split("=", 1) for item in in_container(node, f"cat /proc/{pid[0]}/environ").split("\0")[:-1])
    return argv, environ


# ---------------------------------------------------------------- section 2: the container

def container_differences(node, text, values):
    docker_run = shlex.split(expand(text.command("docker run -d --name sgl_mix"), values))
    info = json.loads(node.sh(f"docker inspect {CONTAINER}").stdout)[0]
    host, config = info["HostConfig"], info["Config"]
    checks = {
        "--name": lambda v: info["Name"] == "/" + v,
        "--network": lambda v: host["NetworkMode"] == v,
        "--ipc": lambda v: host["IpcMode"] == v,
        "--shm-size": lambda v: host["ShmSize"] == int(v[:-1]) * 1024 ** 3 and v.endswith("G"),
        "--device": lambda v: v in [d["PathOnHost"] for d in host["Devices"]],
        "--group-add": lambda v: v in host["GroupAdd"],
        "--cap-add": lambda v: v in host["CapAdd"],
        "--security-opt": lambda v: v in host["SecurityOpt"],
        "-v": lambda v: v in [bind.removesuffix(":rw") for bind in host["Binds"]],
        "--entrypoint": lambda v: not config["Entrypoint"] and v == "",
    }
    differences, index, expected_counts = [], 2, Counter()
    while index < len(docker_run) and docker_run[index].startswith("-"):
        flag, _sep, value = docker_run[index].partition("=")
        if flag == "-d":
            index += 1
            continue
        if not value:
            index += 1
            value = docker_run[index]
        expected_counts[flag] += 1
        if flag not in checks:
            differences.append(f"container: the walkthrough's {flag} is not checked by this test")
        elif not checks[flag](value):
            differences.append(f"container: {flag} {value} not in docker inspect")
        index += 1
    image, command = docker_run[index], docker_run[index + 1:]
    if config["Image"] != image:
        differences.append(f"container: image {config['Image']} instead of {image}")
    if config["Cmd"] != command:
        differences.append(f"container: command {config['Cmd']} instead of {command}")
    # Nothing more than the walkthrough asks, apart from ALLOWED.
    extra_binds = [b.removesuffix(":rw") for b in host["Binds"]]
    for name, actual, wanted in (("--device", len(host["Devices"]), expected_counts["--device"]),
                                 ("--group-add", len(host["GroupAdd"]), expected_counts["--group-add"]),
                                 ("--cap-add", len(host["CapAdd"]), expected_counts["--cap-add"]),
                                 ("-v", len(extra_binds) - 1, expected_counts["-v"])):
        if actual != wanted:
            differences.append(f"container: {actual} {name} entries, the walkthrough has {wanted}")
    if ALLOWED["bind"] not in extra_binds:
        differences.append(f"container: the work directory bind {ALLOWED['bind']} is missing")
    if host.get("Privileged"):
        differences.append("container: privileged, the walkthrough is not")
    return differences


# ---------------------------------------------------------------- sections 3 and 4: router and worker

def router_differences(node, text, values):
    expected = shlex.split(expand(text.command("python -m infera.server"), values))
    argv, _env = process_argv_env(node, "^python -m infera[.]server ")
    return [] if argv == expected else [f"router: ran {argv}\n  walkthrough {expected}"]


def worker_differences(node, text, values, variant):
    prefix = {"nodp": "HIP_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 python -m infera.engine.sglang",
              "dp": "SGLANG_DP_USE_GATHERV=1 HIP_VISIBLE_DEVICES"}[variant]
    words = shlex.split(expand(text.command(prefix), values))
    start = words.index("python")
    expected_env = dict(word.split("=", 1) for word in words[:start])
    expected_env.update(word.split("=", 1) for word in shlex.split(text.command("export SGLANG_USE_AITER=1"))[1:])
    argv, environ = process_argv_env(node, "^python -m infera[.]engine[.]sglang ")
    differences = []
    if argv[:3] != words[start:start + 3]:
        differences.append(f"worker {variant}: runs {argv[:3]}, not {words[start:start + 3]}")
    differences += compare_pairs(f"worker {variant} argv", flag_pairs(words[start + 3:]), flag_pairs(argv[3:]),
                                 allowed=ALLOWED["worker_flags"])
    for name, value in expected_env.items():
        if environ.get(name) != value:
            differences.append(f"worker {variant} env: {name}={environ.get(name)!r}, walkthrough {value!r}")
    for name in environ:
        if name.startswith(LEVER_PREFIXES) and name not in expected_env:
            differences.append(f"worker {variant} env: extra {name}={environ[name]}")
        if name.startswith("INFERA_") and not name.startswith(ALLOWED["env_prefixes"]):
            differences.append(f"worker {variant} env: extra {name}={environ[name]}")
    return differences


# ---------------------------------------------------------------- section 6: the bench loop

def bench_differences(text, values, script_path, conc):
    loop = text.block("for C in 32 64 128; do", "done").splitlines()
    command = next(line for line in loop if line.startswith("python3 -m sglang.bench_serving"))
    expected = shlex.split(expand(command.split(" 2>&1")[0], {**values, "C": conc}))
    script = script_path.read_text().replace("\\\n", " ")
    ran_line = next(line for line in script.splitlines() if line.startswith("python3 -m sglang.bench_serving"))
    ran = shlex.split(ran_line.split(" >")[0].replace('"$dir/', '"'))
    differences = [] if ran[:3] == expected[:3] else [f"bench: runs {ran[:3]}"]
    differences += compare_pairs(f"bench c{conc}", flag_pairs(expected[3:]), flag_pairs(ran[3:]),
                                 allowed=ALLOWED["bench_flags"])
    output = dict(flag_pairs(ran[3:]))["--output-file"]
    if output != dict(flag_pairs(expected[3:]))["--output-file"]:
        differences.append(f"bench c{conc}: output file {output}")
    return differences


def test_deploys_and_a_sweep_point_run_exactly_the_walkthrough(node, text, values, tmp_path):
    differences = []
    for conc, variant in ((256, "dp"), (64, "nodp")):
        playbook("playbooks/deploy_mixed.yml", "-e", f"conc={conc}")
        differences += container_differences(node, text, values)
        differences += router_differences(node, text, values)
        differences += worker_differences(node, text, values, variant)

    results = tmp_path / "results"
    playbook("playbooks/sweep.yml", "-e", json.dumps({"concurrencies": [4], "run_id": "conformance",
                                                      "sweep_results_dir": str(results), **LENGTHS}))
    script = results / "conformance" / node.name / "bench-c4.sh"
    manifest = json.loads((script.parent / "manifest.json").read_text())
    if manifest["recipe"] != "dsv4-pro-mi355x-mixed":
        differences.append(f"sweep manifest: recipe {manifest['recipe']!r}, the walkthrough's is dsv4-pro-mi355x-mixed")
    differences += bench_differences(text, values, script, 4)
    assert not differences, "the collection differs from the walkthrough:\n" + "\n".join(differences)
