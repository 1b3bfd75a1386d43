# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This plugin util is PRIVATE to the infera.serving collection; it may change at any time.

"""What a sweep notes of each phase for its record (roles/sweep/tasks/phase.yml): the variant's engine argv and env
and its accuracy smoke, which the manifest keeps per variant, and the engine's (re)start time, which the end of the
sweep shows beside each point's wall time."""

from __future__ import annotations


def sweep_phase_noted(noted, phase, ran=False, worker=None, verify=None, check_mode=False):
    """`noted` ({variants, restarts}) with `phase` added.

    Every phase's variant is noted with the argv and env the sweep's plan holds for it (a variant noted again is noted
    afresh). When the phase ran (it had points to run and the sweep had not aborted), the worker role's result
    (`worker`, sglang_worker_result) adds the (re)start's seconds if it restarted the engine, and the router's verify
    (`verify`, router_verify_result, not run in check mode) adds the variant's accuracy smoke if it took one.
    """
    noted = noted or {}
    worker, verify = worker or {}, verify or {}
    entry = {'argv': phase.get('argv'), 'env': phase.get('env')}
    restarts = list(noted.get('restarts') or [])
    if ran and not check_mode and verify.get('accuracy') is not None:
        entry['accuracy'] = verify['accuracy']
    if ran and worker.get('restarted'):
        ready = (worker.get('phases') or {}).get('ready') or {}
        restarts.append({'variant': phase.get('variant'), 'seconds': ready.get('since_start')})
    return {'variants': dict(noted.get('variants') or {}, **{phase.get('variant'): entry}), 'restarts': restarts}
