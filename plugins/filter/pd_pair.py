# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

"""infera.serving.pd_pair, pd_problem, pd_leg, pd_ports, pd_reach, pd_unreached, pd_watch and pd_vram_held: a
PD-disaggregated deployment's legs from the inventory's groups, the ports they listen on, the ports each must reach,
the legs a sweep watches, the VRAM its teardown waits for."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.infera.serving.plugins.module_utils._errors import InferaServingError
from ansible_collections.infera.serving.plugins.plugin_utils import _pd_pair


def _one_line(function):
    def run(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except InferaServingError as error:
            raise AnsibleFilterError(str(error)) from error
    return run


class FilterModule:
    """The collection's filters over a PD pair (plugin_utils/_pd_pair.py)."""

    def filters(self):
        return {'pd_pair': _one_line(_pd_pair.pd_pair), 'pd_problem': _pd_pair.pd_problem,
                'pd_leg': _one_line(_pd_pair.pd_leg), 'pd_ports': _pd_pair.pd_ports,
                'pd_reach': _one_line(_pd_pair.pd_reach), 'pd_unreached': _pd_pair.pd_unreached,
                'pd_watch': _one_line(_pd_pair.pd_watch), 'pd_vram_held': _pd_pair.pd_vram_held}
