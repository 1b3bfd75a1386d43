# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This module util is PRIVATE to the infera.serving collection; it may change at any time.

"""The waits' options: read as attributes, the node their messages name, and the checks both waits make.

Both waits also run in slices under an action plugin; the options only that action reads are
named and checked here once.
"""

from __future__ import annotations

import re
import socket

from ansible_collections.infera.serving.plugins.module_utils._errors import WaitError


# A progress line at least once a minute.
MAX_PROGRESS_INTERVAL = 60
# Options the controller-side action reads; the module never receives them.
SLICE_OPTIONS = dict(
    progress_interval=dict(type='int', default=30),
    reconnect_retries=dict(type='int', default=10),
    reconnect_delay=dict(type='float', default=5.0),
    simulated=dict(type='bool', default=False),
)


def validate_action_options(params):
    """Check the slice options (SLICE_OPTIONS) the action plugin reads; raise WaitError."""
    if not 1 <= params['progress_interval'] <= MAX_PROGRESS_INTERVAL:
        raise WaitError('progress_interval must be between 1 and %d seconds (a progress line at least once a '
                        'minute); got %s' % (MAX_PROGRESS_INTERVAL, params['progress_interval']))
    if params['reconnect_retries'] < 0:
        raise WaitError('reconnect_retries must be 0 or more; got %s' % params['reconnect_retries'])
    if params['reconnect_delay'] < 0:
        raise WaitError('reconnect_delay must be 0 or more seconds; got %s' % params['reconnect_delay'])


class WaitOptions:
    """A wait's module options as attributes (options.deadline), plus the node and host its messages name.

    A wait subclasses this, sets what it derives from the options, and checks them.
    """

    def __init__(self, params, argument_spec):
        self._params = params
        self._names = frozenset(argument_spec)
        self.hostname = socket.gethostname()
        self.node = params.get('node') or self.hostname

    def __getattr__(self, name):
        # Only reached for names not set on the instance: the options themselves, as the module passed them.
        names = self.__dict__.get('_names', ())
        if name not in names:
            raise AttributeError(name)
        return self.__dict__['_params'].get(name)


def check_url(name, url):
    """Raise WaitError unless url, the value of option name, is unset or an http:// or https:// URL."""
    if url and not re.match(r'^https?://', url):
        raise WaitError('%s must be an http:// or https:// URL; got %r' % (name, url))
