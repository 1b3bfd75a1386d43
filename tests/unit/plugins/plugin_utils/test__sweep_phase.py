# SPDX-License-Identifier: Apache-2.0
"""What a sweep notes of each phase for its record (plugin_utils/_sweep_phase.py)."""

from __future__ import annotations

from ansible_collections.infera.serving.plugins.plugin_utils._sweep_phase import sweep_phase_noted

NODP = {'variant': 'nodp', 'argv': ['--tp-size', '8'], 'env': {'A': '1'}}
DP = {'variant': 'dp', 'argv': ['--tp-size', '8', '--dp-size', '8'], 'env': {}}
RESTARTED = {'restarted': True, 'phases': {'ready': {'since_start': 28.5}}}
EMPTY = {'variants': {}, 'restarts': []}


def test_a_phase_that_ran_notes_its_accuracy_and_its_restart():
    noted = sweep_phase_noted(EMPTY, NODP, ran=True, worker=RESTARTED, verify={'accuracy': {'correct': 5}})
    assert noted == {'variants': {'nodp': {'argv': NODP['argv'], 'env': NODP['env'], 'accuracy': {'correct': 5}}},
                     'restarts': [{'variant': 'nodp', 'seconds': 28.5}]}
    noted = sweep_phase_noted(noted, DP, ran=True, worker={'restarted': False}, verify={'accuracy': None})
    assert noted['variants']['dp'] == {'argv': DP['argv'], 'env': {}}
    assert noted['restarts'] == [{'variant': 'nodp', 'seconds': 28.5}]


def test_a_phase_that_did_not_run_notes_only_its_argv_and_env_even_with_an_earlier_phase_s_results():
    # sglang_worker_result and router_verify_result still hold the earlier phase's: they must not count here.
    noted = sweep_phase_noted(EMPTY, DP, ran=False, worker=RESTARTED, verify={'accuracy': {'correct': 5}})
    assert noted == {'variants': {'dp': {'argv': DP['argv'], 'env': {}}}, 'restarts': []}


def test_check_mode_keeps_no_accuracy_and_a_restart_without_a_ready_time_is_unknown():
    noted = sweep_phase_noted(EMPTY, NODP, ran=True, worker={'restarted': True}, verify={'accuracy': {'c': 1}},
                              check_mode=True)
    assert noted['variants']['nodp'] == {'argv': NODP['argv'], 'env': NODP['env']}
    assert noted['restarts'] == [{'variant': 'nodp', 'seconds': None}]


def test_a_variant_noted_again_is_noted_afresh_and_the_input_is_not_changed():
    before = sweep_phase_noted(EMPTY, NODP, ran=True, verify={'accuracy': {'c': 1}})
    after = sweep_phase_noted(before, dict(NODP, argv=['--tp-size', '4']), ran=False)
    assert after['variants']['nodp'] == {'argv': ['--tp-size', '4'], 'env': NODP['env']}
    assert before['variants']['nodp']['accuracy'] == {'c': 1}
