# SPDX-License-Identifier: Apache-2.0
"""Make this checkout importable as ansible_collections.infera.serving, with nothing but pytest.

The collection root is the repository root, so a symlink under the ignored .build/ folder
(the same one scripts/bootstrap makes) gives it the path Ansible's import names need.
"""

from __future__ import annotations

import itertools
import os
import sys
from pathlib import Path
from types import SimpleNamespace

import jinja2
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
COLLECTIONS = REPO / '.build' / 'collections'
LINK = COLLECTIONS / 'ansible_collections' / 'infera' / 'serving'


def _link_collection():
    if LINK.is_symlink() and LINK.resolve() != REPO:
        LINK.unlink()
    if not LINK.exists():
        LINK.parent.mkdir(parents=True, exist_ok=True)
        try:
            LINK.symlink_to(os.path.relpath(REPO, LINK.parent), target_is_directory=True)
        except FileExistsError:
            pass  # another test process made it first
    if str(COLLECTIONS) not in sys.path:
        sys.path.insert(0, str(COLLECTIONS))
    os.environ.setdefault('ANSIBLE_COLLECTIONS_PATH', str(COLLECTIONS))


_link_collection()

RECIPES = REPO / 'roles' / 'sglang_worker' / 'recipes'
RECIPE_FILE = RECIPES / 'dsv4-pro-mi355x-mixed.yml'
ROLE_DEFAULTS = REPO / 'roles' / 'sglang_worker' / 'defaults' / 'main.yml'
SHARED_DEFAULTS = REPO / 'roles' / 'infera' / 'defaults' / 'main.yml'
# What an inventory must set for a real node; the role's defaults give the rest (TP size, host, port).
SITE_VALUES = {
    'sglang_worker_model_path': '/data/hf-cache/DeepSeek-V4-Pro',
    'sglang_worker_advertise_host': '10.0.0.5',
    'sglang_worker_etcd_endpoint': 'http://10.0.0.1:2379',
}


def _render(value, context, environment):
    """A whole-string ``{{ expression }}`` keeps its type (8 stays an int), as Ansible's templating does."""
    if isinstance(value, dict):
        return {key: _render(item, context, environment) for key, item in value.items()}
    if isinstance(value, list):
        return [_render(item, context, environment) for item in value]
    if not isinstance(value, str) or '{{' not in value:
        return value
    text = value.strip()
    if text.startswith('{{') and text.endswith('}}') and text.count('{{') == 1:
        return environment.compile_expression(text[2:-2])(**context)
    return environment.from_string(value).render(**context)


def _role_defaults(environment):
    """The worker role's defaults over the infera role's shared names, rendered as far as they go
    (sglang_worker_port is "{{ infera_engine_port }}"; a lookup stays unrendered)."""
    context = yaml.safe_load(SHARED_DEFAULTS.read_text(encoding='utf-8'))
    defaults = yaml.safe_load(ROLE_DEFAULTS.read_text(encoding='utf-8'))
    for name, value in defaults.items():
        try:
            context[name] = _render(value, context, environment)
        except jinja2.TemplateError:
            context[name] = value
    return context


def load_recipe(recipe_file=RECIPE_FILE, **variables):
    """A shipped recipe (the mixed one unless named) with its placeholders rendered from the role's defaults,
    SITE_VALUES and variables."""
    environment = jinja2.Environment(undefined=jinja2.StrictUndefined)
    context = dict(_role_defaults(environment), **SITE_VALUES)
    context.update(variables)
    data = yaml.safe_load(Path(recipe_file).read_text(encoding='utf-8'))
    return _render(data, context, environment)


@pytest.fixture
def recipe():
    """A fresh copy of the shipped tuned recipe for each test, rendered as the role renders it."""
    return load_recipe()


@pytest.fixture
def render_recipe():
    """load_recipe, for a test that renders the recipe with variables of its own."""
    return load_recipe


class FakeClock:
    """The clock the unit tests of the waits run on: time passes only when the code under test sleeps.

    time() and monotonic() read it (from 0); sleep(seconds) moves it on, then does what the test planned for that
    moment: after() a delay (a log line appears, a file grows, a status changes), when() a condition holds. A wait
    polls the same number of times and sees the same things happen between its polls on any machine, however
    loaded. Work the code under test hands to the background (a health check) runs at once, in no time.
    """

    # A wait still going after this many fake seconds, or this many sleeps, never ends: fail it instead of spinning.
    LIMIT = 10000.0
    MAX_SLEEPS = 100000

    def __init__(self):
        self.now = 0.0
        self.slept = []
        self._plans = []
        self._order = itertools.count()

    def time(self):
        return self.now

    monotonic = time

    def sleep(self, seconds):
        assert seconds >= 0, 'slept %r seconds' % seconds
        self.slept.append(seconds)
        # Rounded, so that twenty sleeps of 0.05 s make exactly 1 s, as a deadline compared with >= expects; but a
        # sleep until a moment the code worked out (0.30000000000000004) gets there, however short.
        rounded = round(self.now + seconds, 9)
        self.now = rounded if rounded > self.now or not seconds else self.now + seconds
        if self.now > self.LIMIT or len(self.slept) > self.MAX_SLEEPS:
            raise AssertionError('the wait slept %d times, to %g fake seconds: it would never end' % (len(self.slept), self.now))
        self._run_due()

    def after(self, seconds, action):
        """Do action once seconds have passed from now, at the end of the sleep that gets there."""
        due = round(self.now + seconds, 9)
        self._plan(due, lambda: self.now >= due, action)

    def when(self, condition, action):
        """Do action at the end of the first sleep after which condition() holds."""
        self._plan(self.now, condition, action)

    def in_background(self, work):
        """Run work at once and return it as a thread that has already finished."""
        work()
        return SimpleNamespace(is_alive=lambda: False, join=lambda timeout=None: None)

    def _plan(self, due, condition, action):
        self._plans.append((due, next(self._order), condition, action))

    def _run_due(self):
        # Earliest first; what one action does (a status that changes) may make another plan due in the same sleep.
        while True:
            due = [plan for plan in sorted(self._plans, key=lambda plan: plan[:2]) if plan[2]()]
            if not due:
                return
            self._plans.remove(due[0])
            due[0][3]()


@pytest.fixture
def clock():
    """A FakeClock for a wait under test: pass clock.time (or monotonic) and clock.sleep."""
    return FakeClock()
