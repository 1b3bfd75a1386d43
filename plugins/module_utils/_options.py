# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This module util is PRIVATE to the infera.serving collection; it may change at any time.

"""The waits' options: read as attributes, the node their messages name, and the checks both waits make."""

from __future__ import annotations

import re
import socket

from ansible_collections.infera.serving.plugins.module_utils._errors import WaitError


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
