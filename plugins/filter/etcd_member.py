# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

"""infera.serving.etcd_addresses, etcd_member_names and etcd_member_listed: the etcd role's member."""

from __future__ import annotations

from ansible_collections.infera.serving.plugins.plugin_utils._etcd_member import (
    etcd_addresses, etcd_member_listed, etcd_member_names)


class FilterModule:
    """The collection's filters over the etcd member the etcd role runs (plugin_utils/_etcd_member.py)."""

    def filters(self):
        return {'etcd_addresses': etcd_addresses, 'etcd_member_names': etcd_member_names, 'etcd_member_listed': etcd_member_listed}
