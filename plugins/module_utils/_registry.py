# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This module util is PRIVATE to the infera.serving collection; it may change at any time.

"""An image's registry: the host its reference names, and whether that registry answers."""

from __future__ import annotations

from urllib.error import HTTPError

from ansible.module_utils.urls import open_url

_DOCKER_HUB = ('docker.io', 'index.docker.io', 'registry-1.docker.io')


def registry_host(image):
    """The registry host an image reference names, or None for Docker Hub (docker's own rule: the first path
    component is a host when it has a dot or a port, or is localhost)."""
    name = image.split('@', 1)[0]
    first, slash, _rest = name.partition('/')
    if slash and ('.' in first or ':' in first or first == 'localhost') and first not in _DOCKER_HUB:
        return first
    return None


def probe_registry(host, timeout):
    """(how the registry answered GET /v2/, or None; what each try got). A 401 answers: it wants a login.

    https first; http for a registry the engine is told is insecure (--insecure-registry).
    """
    problems = []
    for scheme in ('https', 'http'):
        url = '%s://%s/v2/' % (scheme, host)
        try:
            response = open_url(url, method='GET', timeout=timeout)
            try:
                return 'HTTP %d over %s' % (response.getcode(), scheme), problems
            finally:
                response.close()
        except HTTPError as error:
            if error.code == 401:
                return 'HTTP 401 over %s (it wants a login)' % scheme, problems
            problems.append('%s: HTTP %d' % (url, error.code))
        except Exception as error:  # pylint: disable=broad-except
            problems.append('%s: %s' % (url, error))
    return None, problems
