# SPDX-License-Identifier: Apache-2.0
"""roles/sweep/files/power_sampler.py: amd-smi's power JSON in both ROCm shapes, one call, the sampling loop on
injected clocks (no real sleeping), and the script itself against the rehearsal's SIMULATED amd-smi."""

import importlib.util
import io
import json
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
SAMPLER = REPO / 'roles' / 'sweep' / 'files' / 'power_sampler.py'


def load_sampler():
    spec = importlib.util.spec_from_file_location('power_sampler', SAMPLER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


power_sampler = load_sampler()


def watts(value):
    return {'value': value, 'unit': 'W'}


def power(socket_power):
    """One GPU's power section as the CLI prints it (amdsmi_commands.py metric_gpu: these keys, this order)."""
    return {'socket_power': socket_power, 'gfx_voltage': 'N/A', 'soc_voltage': 'N/A', 'mem_voltage': 'N/A',
            'throttle_status': 'N/A', 'power_management': 'ENABLED'}


GPUS = [{'gpu': 0, 'power': power(watts(842))}, {'gpu': 1, 'power': power(watts(1191))},
        {'gpu': 2, 'power': power('N/A')}, {'gpu': 3, 'power': dict(power(watts(236)), ubb_power='N/A')}]
EXPECTED = [(0, 842.0), (1, 1191.0), (3, 236.0)]


# ---------------------------------------------------------------- parse_power

@pytest.mark.parametrize('document', [
    {'gpu_data': GPUS},                                    # ROCm 7.x (later releases: non-empty arrays only)
    {'cpu_data': [], 'core_data': [], 'gpu_data': GPUS},   # ROCm 7.0
    GPUS,                                                  # ROCm 6.x: the bare list
], ids=['rocm7', 'rocm7.0', 'rocm6'])
def test_both_rocm_shapes_give_the_gpus_with_a_socket_power(document):
    assert power_sampler.parse_power(json.dumps(document, indent=4)) == EXPECTED


def test_unreadable_powers_and_odd_entries_are_left_out():
    document = {'gpu_data': [
        {'gpu': 0, 'power': power({'value': 'N/A', 'unit': 'W'})},  # older CLIs format N/A with its unit
        {'gpu': 1, 'power': 'N/A'},
        {'gpu': 2},
        {'gpu': True, 'power': power(watts(5))},
        {'power': power(watts(5))},
        'N/A',
        {'gpu': '4', 'power': power(watts(512.5))},
        {'gpu': 5, 'power': power({'value': 640000, 'unit': 'mW'})},
        {'gpu': 6, 'power': power({'value': 7, 'unit': 'furlongs'})},
    ]}
    assert power_sampler.parse_power('WARNING: User is missing the following required groups: render\n'
                                     + json.dumps(document)) == [(4, 512.5), (5, 640.0)]


@pytest.mark.parametrize('text', ['', 'amd-smi: no GPU found', '{"cpu_data": []}', '{"gpu_data": "N/A"}', '"N/A"'])
def test_output_without_a_gpu_list_is_an_error(text):
    with pytest.raises(power_sampler.SamplerError):
        power_sampler.parse_power(text)


# ---------------------------------------------------------------- sample_once

class Runner:
    """subprocess.run's stand-in: records the command, answers what it was given."""

    def __init__(self, returncode=0, stdout='', stderr='', error=None):
        self.answer = subprocess.CompletedProcess([], returncode, stdout, stderr)
        self.error = error
        self.commands = []

    def __call__(self, command, **options):
        self.commands.append((command, options))
        if self.error is not None:
            raise self.error
        return self.answer


def test_one_call_runs_metric_power_json():
    runner = Runner(stdout=json.dumps({'gpu_data': GPUS}))
    assert power_sampler.sample_once('/opt/rocm/bin/amd-smi', runner=runner, timeout=3) == EXPECTED
    (command, options), = runner.commands
    assert command == ['/opt/rocm/bin/amd-smi', 'metric', '--power', '--json']
    assert options['timeout'] == 3 and options['stdin'] == subprocess.DEVNULL


@pytest.mark.parametrize('runner, message', [
    (Runner(returncode=1, stderr='trace\nAmdSmiLibraryException: Error code: 8\n'), 'exited 1: AmdSmiLibraryException'),
    (Runner(error=subprocess.TimeoutExpired('amd-smi', 3)), 'did not answer within 3 s'),
    (Runner(error=FileNotFoundError(2, 'No such file or directory')), 'cannot run amd-smi: No such file'),
    (Runner(stdout='nothing'), 'no JSON'),
])
def test_a_failing_call_is_a_sampler_error_saying_why(runner, message):
    with pytest.raises(power_sampler.SamplerError, match=message):
        power_sampler.sample_once('amd-smi', runner=runner, timeout=3)


def test_amd_smi_is_found_on_path_or_where_rocm_puts_it(tmp_path, monkeypatch):
    monkeypatch.setattr(power_sampler, 'ROCM_BIN', str(tmp_path))
    monkeypatch.setenv('PATH', '/nonexistent')
    tool = tmp_path / 'amd-smi'
    tool.write_text('#!/bin/sh\n')
    tool.chmod(0o755)
    assert power_sampler.resolve_amd_smi('amd-smi') == str(tool)
    assert power_sampler.resolve_amd_smi('/usr/local/bin/amd-smi') == '/usr/local/bin/amd-smi'
    assert power_sampler.resolve_amd_smi('no-such-tool') == 'no-such-tool'


# ---------------------------------------------------------------- run, on injected clocks

class Clocks:
    """A monotonic clock, a wall clock 1e9 s ahead of it, a sleep that moves both, and the sleeps asked for."""

    def __init__(self):
        self.now = 50.0
        self.sleeps = []

    def clock(self):
        return self.now

    def wall(self):
        return self.now + 1e9

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


class Sampler:
    """sample(amd_smi): each call takes ``durations[i]`` on the clocks and gives ``results[i]`` (raised when an error)."""

    def __init__(self, clocks, results, durations=None):
        self.clocks = clocks
        self.results = list(results)
        self.durations = list(durations or [0.0] * len(self.results))
        self.calls = []

    def __call__(self, amd_smi):
        self.calls.append((amd_smi, self.clocks.now))
        self.clocks.now += self.durations.pop(0)
        result = self.results.pop(0)
        if isinstance(result, Exception):
            raise result
        return result

    def done(self):
        return not self.results


def run(clocks, sampler, interval=1.0):
    out, errors = io.StringIO(), io.StringIO()
    written = power_sampler.run(out, interval, 'amd-smi', clock=clocks.clock, sleep=clocks.sleep, stop=sampler.done,
                                wall=clocks.wall, sample=sampler, errors=errors)
    return written, [json.loads(line) for line in out.getvalue().splitlines()], errors.getvalue()


def test_ticks_follow_the_monotonic_clock_and_do_not_drift():
    clocks = Clocks()
    sampler = Sampler(clocks, [[(0, 300.0)]] * 4, durations=[0.25, 0.5, 0.75, 0.25])
    written, samples, errors = run(clocks, sampler)
    assert [started for _tool, started in sampler.calls] == [50.0, 51.0, 52.0, 53.0]
    assert clocks.sleeps == [0.75, 0.5, 0.25]
    assert written == 4 and errors == ''
    # Each sample is stamped halfway through its call, on the wall clock (to the millisecond).
    assert samples == [{'time': 1e9 + stamp, 'gpu': 0, 'watts': 300.0} for stamp in (50.125, 51.25, 52.375, 53.125)]


def test_a_call_outlasting_the_interval_skips_the_ticks_it_overran():
    clocks = Clocks()
    sampler = Sampler(clocks, [[(0, 1.0)], [(0, 2.0)], [(0, 3.0)]], durations=[2.5, 0.0, 0.0])
    run(clocks, sampler)
    assert [started for _tool, started in sampler.calls] == [50.0, 53.0, 54.0]


def test_every_gpu_of_a_call_gets_a_line_with_the_same_time():
    clocks = Clocks()
    _written, samples, _errors = run(clocks, Sampler(clocks, [[(0, 842.0), (1, 1191.0), (3, 236.0)]]))
    assert samples == [{'time': 1e9 + 50.0, 'gpu': gpu, 'watts': value} for gpu, value in EXPECTED]


def test_a_failing_amd_smi_is_reported_once_retried_and_its_recovery_noted():
    clocks = Clocks()
    failure = power_sampler.SamplerError('amd-smi metric --power --json exited 1: no GPU')
    results = [failure, failure, failure, [(0, 500.0)], [], [], [(0, 510.0)], failure]
    written, samples, errors = run(clocks, Sampler(clocks, results))
    assert [sample['watts'] for sample in samples] == [500.0, 510.0] and written == 2
    assert errors.splitlines() == [
        'power_sampler: amd-smi metric --power --json exited 1: no GPU; retrying every interval',
        'power_sampler: amd-smi answers again',
        'power_sampler: amd-smi printed no socket power (N/A on every GPU); retrying every interval',
        'power_sampler: amd-smi answers again',
        'power_sampler: amd-smi metric --power --json exited 1: no GPU; retrying every interval',
    ]
    assert clocks.sleeps == [1.0] * 7


def test_stop_ends_the_loop_before_the_next_sleep_and_a_path_is_started_afresh(tmp_path):
    out = tmp_path / 'results' / 'power_c4.jsonl'
    out.parent.mkdir()
    out.write_text('{"time": 1.0, "gpu": 0, "watts": 1.0}\n')
    clocks = Clocks()
    calls = []

    def sample(amd_smi):
        calls.append(amd_smi)
        return [(0, 700.0), (1, 710.0)]

    written = power_sampler.run(str(out), 0.5, '/opt/rocm/bin/amd-smi', clock=clocks.clock, sleep=clocks.sleep,
                                stop=lambda: len(calls) == 3, wall=clocks.wall, sample=sample, errors=io.StringIO())
    assert written == 6 and calls == ['/opt/rocm/bin/amd-smi'] * 3 and clocks.sleeps == [0.5, 0.5]
    text = out.read_text()
    assert text.endswith('\n') and [json.loads(line)['gpu'] for line in text.splitlines()] == [0, 1] * 3


def test_the_controller_reads_back_what_the_sampler_writes(tmp_path):
    # The unit tests' conftest makes the collection importable.
    from ansible_collections.infera.serving.plugins.plugin_utils import _sweep_energy as sweep_energy

    clocks = Clocks()
    out = tmp_path / 'power_c2.jsonl'
    sampler = Sampler(clocks, [[(0, 400.0), (1, 600.0)], [(0, 800.0), (1, 1000.0)]])
    power_sampler.run(str(out), 1.0, 'amd-smi', clock=clocks.clock, sleep=clocks.sleep, stop=sampler.done,
                      wall=clocks.wall, sample=sampler, errors=io.StringIO())
    samples = sweep_energy.read_samples(str(out))
    assert [(sample['gpu'], sample['watts']) for sample in samples] == [(0, 400.0), (1, 600.0), (0, 800.0), (1, 1000.0)]
    # 2 GPUs: 1000 W total at +50 s, 1800 W at +51 s: (1000 + 1800) / 2 J over the 1 s window, 700 W a GPU.
    figures = sweep_energy.energy_figures(samples, 1e9 + 50.0, 1e9 + 51.0, 140, 1400, gpus=2)
    assert figures['avg_power_w'] == pytest.approx(700.0) and figures['peak_power_w'] == 1000.0


@pytest.mark.parametrize('argv', [['out.jsonl', '--interval', '0'], ['out.jsonl', '--interval', 'fast'], []])
def test_bad_arguments_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as exited:
        power_sampler.main(argv)
    assert exited.value.code == 2
    assert 'power_sampler.py' in capsys.readouterr().err


# ---------------------------------------------------------------- the script against the SIMULATED amd-smi
