# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

"""infera.serving.stack_info: probe the image's Infera and SGLang inside the worker container.

With ``container``, the probe (module_utils/_stack.py PROBE) runs through community.docker.docker_container_exec on the
node, in the container, with the image's python3; the decision is made here, on the controller, by the same
``describe`` the module uses. Without ``container`` the module itself runs.
"""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.infera.serving.plugins.module_utils._errors import WaitError
from ansible_collections.infera.serving.plugins.module_utils._stack import ARGUMENT_SPEC, PROBE, describe, parse


class ActionModule(ActionBase):

    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp  # unused since ansible-core 2.x, kept for the signature

        _validation, params = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        if not params['container']:
            result.update(self._execute_module(module_name='infera.serving.stack_info', module_args=params,
                                               task_vars=task_vars))
            return result
        executed = self._execute_module(
            module_name='community.docker.docker_container_exec',
            module_args=dict(container=params['container'], argv=['python3', '-c', PROBE]),
            task_vars=task_vars)
        if executed.get('skipped'):
            # community.docker.docker_container_exec does not run in check mode.
            result.update(skipped=True, msg='not probed in check mode (docker exec does not run in check mode)')
            return result
        try:
            if executed.get('failed') or executed.get('rc', 1) != 0:
                raise WaitError('the stack probe could not run in %s (%s)' % (
                    params['container'],
                    (executed.get('msg') or executed.get('stderr') or 'exit %s' % executed.get('rc')).strip()[-300:]))
            facts = parse(executed.get('stdout', ''))
            stack = describe(facts, params['deadline'])
        except WaitError as error:
            result.update(failed=True, msg='%s: stage stack: %s. Next step: check the image runs python3 and has '
                                           'Infera (docker exec %s python3 -c "import infera"), then rerun.'
                          % (params['node'], error, params['container']))
            return result
        result.update(changed=False, stack=stack, facts=facts)
        return result
