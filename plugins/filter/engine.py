# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

"""infera.serving.engine_inflight: the requests an SGLang engine has in flight, from its /metrics text."""

from __future__ import annotations

from ansible_collections.infera.serving.plugins.plugin_utils._engine_load import inflight


class FilterModule:
    """The collection's filters."""

    def filters(self):
        return {'engine_inflight': inflight}
