# SPDX-License-Identifier: Apache-2.0
"""The engine image's SIMULATED ibv_devinfo (tests/rehearsal/images/engine/ibv_devinfo), run on tmp dirs.

Its stdout must keep the real tool's layout, rdma-core's libibverbs/examples/devinfo.c (print_hca_cap() and main()):
one "hca_id:" block per device, "No IB devices found" on stderr and exit status 255 (return -1) when there is none.
The PD page (docs/reference/sglang-1p1d-dsv4-pro-mi355x.md) counts `ibv_devinfo | grep -c PORT_ACTIVE` in the worker
container and, on 0, overlays the host's libionic; the ionic provider layouts here are the ones the node and engine
Dockerfiles install, read from the Dockerfiles, and the overlay is the page's own two command lines.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
IMAGES = REPO / 'tests' / 'rehearsal' / 'images'
IBV_DEVINFO = IMAGES / 'engine' / 'ibv_devinfo'
PAGE = REPO / 'docs' / 'reference' / 'sglang-1p1d-dsv4-pro-mi355x.md'
LIB = '/usr/lib/x86_64-linux-gnu'
PROVIDER = 'libibverbs/libionic-rdmav34.so'
VERSIONED = 'libionic.so.1.0.54.0'

# One device's lines without -v, as devinfo.c's print_hca_cap() prints them (lines 556-570: the device; 650-671 and
# 706: each port, then an empty line). ionic devices have one port, a RoCE (Ethernet) one.
HCA_LAYOUT = [
    r'hca_id:\t(?P<hca>\S+)',
    r'\ttransport:\t\t\tInfiniBand \(0\)',
    r'\tfw_ver:\t\t\t\t\S+',
    r'\tnode_guid:\t\t\t[0-9a-f]{4}:[0-9a-f]{4}:[0-9a-f]{4}:[0-9a-f]{4}',
    r'\tsys_image_guid:\t\t\t[0-9a-f]{4}:[0-9a-f]{4}:[0-9a-f]{4}:[0-9a-f]{4}',
    r'\tvendor_id:\t\t\t0x[0-9a-f]{4}',
    r'\tvendor_part_id:\t\t\t\d+',
    r'\thw_ver:\t\t\t\t0x[0-9A-F]+',
    r'\tphys_port_cnt:\t\t\t1',
    r'\t\tport:\t1',
    r'\t\t\tstate:\t\t\t(?P<state>PORT_\w+) \((?P<state_number>\d)\)',
    r'\t\t\tmax_mtu:\t\t4096 \(5\)',
    r'\t\t\tactive_mtu:\t\t(?P<mtu>\d+) \((?P<mtu_number>\d)\)',
    r'\t\t\tsm_lid:\t\t\t\d+',
    r'\t\t\tport_lid:\t\t\d+',
    r'\t\t\tport_lmc:\t\t0x[0-9a-f]{2}',
    r'\t\t\tlink_layer:\t\tEthernet',
    r'',
]
# libibverbs/verbs.h: enum ibv_port_state and enum ibv_mtu
PORT_STATES = {'PORT_DOWN': '1', 'PORT_INIT': '2', 'PORT_ARMED': '3', 'PORT_ACTIVE': '4'}
MTUS = {'256': '1', '512': '2', '1024': '3', '2048': '4', '4096': '5'}


def install(image, lib):
    """Lay out under `lib` what the image's Dockerfile puts under /usr/lib/x86_64-linux-gnu (COPY, mkdir -p, ln -sf)."""
    text = (IMAGES / image / 'Dockerfile').read_text(encoding='utf-8').replace('\\\n', ' ')
    lib.mkdir(parents=True, exist_ok=True)
    for source, target in re.findall(r'^COPY (\S+) (%s/\S+)$' % re.escape(LIB), text, re.MULTILINE):
        destination = lib / os.path.relpath(target, LIB)
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(IMAGES / image / source, destination)
    for directory in re.findall(r'mkdir -p (%s/\S+)' % re.escape(LIB), text):
        (lib / os.path.relpath(directory, LIB)).mkdir(parents=True, exist_ok=True)
    for target, link in re.findall(r'ln -sf (\S+) (%s/\S+)' % re.escape(LIB), text):
        path = lib / os.path.relpath(link, LIB)
        if path.is_symlink():
            path.unlink()
        path.symlink_to(target)
    return lib


def marker(path):
    return re.findall(r'^ionic-abi (\S+)$', Path(path).read_text(encoding='utf-8'), re.MULTILINE)


@pytest.fixture
def node(tmp_path):
    """The node's host library dir, as the node Dockerfile installs it."""
    return install('node', tmp_path / 'node-lib')


@pytest.fixture
def container(tmp_path):
    """The worker container: /dev/infiniband with uverbs0..7 (the node's default 8 ports) and the engine image's lib."""
    dev = tmp_path / 'dev-infiniband'
    dev.mkdir()
    (dev / 'rdma_cm').touch()
    for index in range(8):
        (dev / ('uverbs%d' % index)).touch()
    return {'dev': dev, 'lib': install('engine', tmp_path / 'container-lib')}


def sim_env(container):
    return dict(os.environ, INFERA_SIM_IB_DEV_DIR=str(container['dev']), INFERA_SIM_LIB_DIR=str(container['lib']))


def ibv_devinfo(container, *arguments):
    result = subprocess.run(['/bin/sh', str(IBV_DEVINFO)] + list(arguments), env=sim_env(container),
                            capture_output=True, text=True, check=False)
    assert 'SIMULATED' in result.stderr
    return result


def grep_c_port_active(container):
    """What the page runs in the container: `ibv_devinfo | grep -c PORT_ACTIVE`, its stdout."""
    command = 'sh %s | grep -c PORT_ACTIVE' % shlex.quote(str(IBV_DEVINFO))
    return subprocess.run(['/bin/sh', '-c', command], env=sim_env(container), capture_output=True, text=True,
                          check=False).stdout


def hcas(stdout):
    """Each device block of the output, checked line by line against HCA_LAYOUT: [named groups]."""
    lines = stdout.split('\n')
    assert lines[-1] == '', 'the output ends with a newline'
    lines = lines[:-1]
    assert len(lines) % len(HCA_LAYOUT) == 0, stdout
    blocks = []
    for start in range(0, len(lines), len(HCA_LAYOUT)):
        fields = {}
        for pattern, line in zip(HCA_LAYOUT, lines[start:start + len(HCA_LAYOUT)]):
            found = re.fullmatch(pattern, line)
            assert found, 'line %r is not devinfo.c\'s %r' % (line, pattern)
            fields.update(found.groupdict())
        assert PORT_STATES[fields['state']] == fields['state_number']
        assert MTUS[fields['mtu']] == fields['mtu_number']
        blocks.append(fields)
    return blocks


def grep_c(stdout, word):
    """Lines holding `word`, as grep -c counts them."""
    return sum(word in line for line in stdout.splitlines())


def test_eight_ports_are_active_in_devinfo_c_s_layout(container):
    result = ibv_devinfo(container)
    assert result.returncode == 0
    blocks = hcas(result.stdout)
    assert [block['hca'] for block in blocks] == ['ionic_%d' % index for index in range(8)]
    assert {(block['state'], block['mtu']) for block in blocks} == {('PORT_ACTIVE', '4096')}
    assert grep_c(result.stdout, 'PORT_ACTIVE') == 8
    assert grep_c_port_active(container) == '8\n'


def test_one_hca_per_uverbs_node(container):
    for index in range(3, 8):
        (container['dev'] / ('uverbs%d' % index)).unlink()
    assert [block['hca'] for block in hcas(ibv_devinfo(container).stdout)] == ['ionic_0', 'ionic_1', 'ionic_2']
    assert grep_c_port_active(container) == '3\n'


@pytest.mark.parametrize('left', ['rdma_cm only', 'no /dev/infiniband'])
def test_no_device_is_the_real_error(container, left):
    for path in container['dev'].glob('uverbs*'):
        path.unlink()
    if left == 'no /dev/infiniband':
        shutil.rmtree(container['dev'])
    result = ibv_devinfo(container)
    # devinfo.c main(): fprintf(stderr, "No IB devices found\n"); ret = -1 -> exit status 255
    assert (result.returncode, result.stdout) == (255, '')
    assert result.stderr.splitlines()[-1] == 'No IB devices found'
    assert grep_c_port_active(container) == '0\n'


def test_list_device_and_port_options(container):
    listed = ibv_devinfo(container, '-l')
    assert (listed.returncode, listed.stdout) == (0, '8 HCAs found:\n%s\n' % ''.join(
        '\tionic_%d\n' % index for index in range(8)))
    one = ibv_devinfo(container, '-d', 'ionic_3')
    assert one.returncode == 0 and [block['hca'] for block in hcas(one.stdout)] == ['ionic_3']
    assert hcas(ibv_devinfo(container, '--ib-dev=ionic_5', '-i', '1').stdout)[0]['hca'] == 'ionic_5'
    missing = ibv_devinfo(container, '-d', 'mlx5_0')
    assert (missing.returncode, missing.stdout) == (255, '')
    assert missing.stderr.splitlines()[-1] == "IB device 'mlx5_0' wasn't found"
    beyond = ibv_devinfo(container, '-d', 'ionic_0', '-i', '2')
    assert (beyond.returncode, beyond.stdout) == (4, '')
    assert beyond.stderr.splitlines()[-1] == 'Invalid port requested for device'
    zero = ibv_devinfo(container, '-i', '0')
    assert zero.returncode == 1 and zero.stdout.startswith('Usage: ')
    for path in list(container['dev'].glob('uverbs*'))[1:]:
        path.unlink()
    assert ibv_devinfo(container, '--list').stdout.startswith('1 HCA found:\n')


def test_the_node_and_the_image_ship_the_host_driver_s_marker(node, container):
    assert os.readlink(node / 'libionic.so.1') == VERSIONED
    assert os.readlink(container['lib'] / 'libionic.so.1') == VERSIONED
    assert os.readlink(container['lib'] / 'libionic.so') == 'libionic.so.1'
    # rdma-core's rdma_shared_provider() links the provider to the versioned file (buildlib/rdma_functions.cmake)
    assert os.readlink(container['lib'] / PROVIDER) == '../' + VERSIONED
    assert marker(node / VERSIONED) == marker(container['lib'] / VERSIONED) == ['host-54']


def mismatch(container, style):
    lib = container['lib']
    if style == 'marker rewritten':
        # what a rehearsal test runs in the container; `>` writes through the links to the versioned file
        with open(lib / 'libionic.so.1', 'w', encoding='utf-8') as handle:
            handle.write('SIMULATED placeholder for a provider built for another driver\nionic-abi image-50\n')
    else:  # the image bundles an older provider under its own name
        (lib / 'libionic.so.1.0.50.0').write_text('SIMULATED older bundled provider\nionic-abi image-50\n',
                                                  encoding='utf-8')
        for link, target in (('libionic.so.1', 'libionic.so.1.0.50.0'), (PROVIDER, '../libionic.so.1.0.50.0')):
            (lib / link).unlink()
            (lib / link).symlink_to(target)


STYLES = ['marker rewritten', 'older provider bundled']


@pytest.mark.parametrize('style', STYLES)
def test_a_mismatched_provider_has_every_port_down(container, style):
    mismatch(container, style)
    result = ibv_devinfo(container)
    assert result.returncode == 0
    assert {(block['state'], block['state_number']) for block in hcas(result.stdout)} == {('PORT_DOWN', '1')}
    assert grep_c(result.stdout, 'PORT_ACTIVE') == 0
    assert grep_c_port_active(container) == '0\n'


def page_overlay():
    """The page's two overlay lines (host shell: readlink + docker cp; then docker exec ln -sf ... ldconfig)."""
    lines = PAGE.read_text(encoding='utf-8').splitlines()
    found = [index for index, line in enumerate(lines) if line.startswith('HL=$(readlink -f ')]
    assert len(found) == 1, "the page's libionic overlay"
    return lines[found[0]], lines[found[0] + 1]


def on_tmp_dirs(line, replacements):
    for old, new in replacements:
        assert line.count(old) == 1, 'the page overlay line changed: %r has no single %r' % (line, old)
        line = line.replace(old, new)
    return line


@pytest.mark.parametrize('style', STYLES)
def test_the_page_s_overlay_of_the_host_provider_makes_them_active_again(node, container, style):
    mismatch(container, style)
    copy, relink = page_overlay()
    script = '\n'.join([
        on_tmp_dirs(copy, [('readlink -f %s/' % LIB, 'readlink -f "$NODE_LIB"/'),
                           ('docker cp "$HL" pd_bench:%s/' % LIB, 'cp "$HL" "$CONTAINER_LIB"/')]),
        on_tmp_dirs(relink, [('docker exec pd_bench bash -lc "', 'sh -c "'),
                             ('cd %s &&' % LIB, 'cd \'$CONTAINER_LIB\' &&'),
                             ('ldconfig;', 'true;'),  # never this machine's ldconfig
                             ('ibv_devinfo |', 'sh \'$IBV_DEVINFO\' |')]),
    ])
    env = dict(sim_env(container), NODE_LIB=str(node), CONTAINER_LIB=str(container['lib']),
               IBV_DEVINFO=str(IBV_DEVINFO))
    result = subprocess.run(['/bin/sh', '-c', script], env=env, capture_output=True, text=True, check=False)
    assert (result.returncode, result.stdout) == (0, '8\n'), result.stderr
    lib = container['lib']
    assert os.readlink(lib / 'libionic.so.1') == VERSIONED
    assert os.readlink(lib / PROVIDER) == '../' + VERSIONED
    assert marker(lib / VERSIONED) == ['host-54']
    assert {block['state'] for block in hcas(ibv_devinfo(container).stdout)} == {'PORT_ACTIVE'}


def test_a_provider_libibverbs_cannot_load_leaves_no_device(container):
    (container['lib'] / PROVIDER).unlink()
    result = ibv_devinfo(container)
    assert (result.returncode, result.stdout) == (255, '')
    assert "libibverbs: Warning: couldn't load driver 'libionic-rdmav34.so'" in result.stderr
    assert result.stderr.splitlines()[-1] == 'No IB devices found'
    assert grep_c_port_active(container) == '0\n'


def test_a_bad_option_prints_the_usage(container):
    result = ibv_devinfo(container, '-x')
    assert result.returncode == 255 and result.stdout.startswith('Usage: ')
    assert "invalid option -- 'x'" in result.stderr
