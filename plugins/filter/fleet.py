# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

"""infera.serving's fleet filters: what deploy_mixed.yml decides and says about the fleet, from every node's facts."""

from __future__ import annotations

from ansible_collections.infera.serving.plugins.plugin_utils._fleet import (fleet_routers, fleet_summary,
                                                                            rollout_failed_hosts, rollout_verdict)


class FilterModule:
    """The collection's filters over hostvars."""

    def filters(self):
        return {'rollout_failed_hosts': rollout_failed_hosts, 'rollout_verdict': rollout_verdict,
                'fleet_routers': fleet_routers, 'fleet_summary': fleet_summary}
