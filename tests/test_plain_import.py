"""The plugin's own modules load as Python loads them, not through pytest's assertion rewriting (which pytest
applies to every module of an installed plugin's distribution, and which under ``PYTHONDONTWRITEBYTECODE``
parses and compiles each module again at every start). Tests, conftest files and the user's registered
helpers are still rewritten."""

from __future__ import annotations

import importlib
import json
import os
import sys
from importlib.machinery import SourceFileLoader
from pathlib import Path

import pytest

import pytest_agentreplay
from pytest_agentreplay import plain_import
from pytest_agentreplay.plain_import import FINDER, install

# An editable install (this checkout's) is found by setuptools' finder, which sits behind pytest's hook, so
# that hook never loads the package, marked or not. A wheel install is imitated: the checkout on PYTHONPATH
# (found as a wheel in site-packages is), and a plugin loaded with -p before the entry points marking the
# package for rewriting, as pytest marks every top-level package of an installed plugin's distribution.
MARK_AS_INSTALLED = """
import pytest

pytest.register_assert_rewrite("pytest_agentreplay")
"""

REPORT_LOADERS = """
import json
import os
import sys


def pytest_sessionfinish(session):
    loaders = {
        name: type(module.__loader__).__name__
        for name, module in list(sys.modules.items())
        if name.startswith("pytest_agentreplay") and getattr(module, "__loader__", None) is not None
    }
    order = [type(finder).__name__ for finder in sys.meta_path]
    (session.config.rootpath / "loaders.json").write_text(json.dumps({"loaders": loaders, "order": order}))
"""

AGENT_TESTS = """
import helpers


def test_agent(agent_replay):
    assert agent_replay.mode in ("record", "regression")


def test_user_assertion_still_rewritten():
    values = [1, 2]
    assert values == [1, 3]


def test_registered_helper_still_rewritten():
    helpers.check([1, 2])
"""

HELPERS = """
def check(values):
    assert values == [1, 4]
"""


def test_finder_answers_for_this_package_s_submodules_only() -> None:
    path = list(pytest_agentreplay.__path__)
    spec = FINDER.find_spec("pytest_agentreplay.api", path)
    assert spec is not None and isinstance(spec.loader, SourceFileLoader)
    assert spec.origin is not None and spec.origin.endswith("api.py")
    # The package itself, other packages, and a name that only starts like ours: left to the other finders.
    assert FINDER.find_spec("pytest_agentreplay", None) is None
    assert FINDER.find_spec("json.decoder", list(sys.modules["json"].__path__)) is None
    assert FINDER.find_spec("pytest_agentreplay_other.session", path) is None
    # A submodule that does not exist: None, so the import fails as it would without the finder.
    assert FINDER.find_spec("pytest_agentreplay.no_such_module", path) is None


def test_install_puts_it_on_meta_path_once() -> None:
    install()
    install()
    assert sys.meta_path.count(FINDER) == 1
    importlib.reload(plain_import)  # a second class object: still one finder
    assert sum(type(f).__name__ == "OwnModulesFinder" for f in sys.meta_path) == 1


def test_installed_plugin_modules_are_not_rewritten(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkout = Path(pytest_agentreplay.__file__).parent.parent
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [str(checkout), os.environ.get("PYTHONPATH")]))
    )
    pytester.makepyfile(mark_as_installed=MARK_AS_INSTALLED, helpers=HELPERS, test_agent=AGENT_TESTS)
    pytester.makeconftest(
        REPORT_LOADERS + '\npytest_plugins = []\n\nimport pytest\npytest.register_assert_rewrite("helpers")\n'
    )
    result = pytester.runpytest_subprocess(
        "-p", "mark_as_installed", "--agentreplay-record=all", "-p", "no:randomly"
    )
    result.assert_outcomes(passed=1, failed=2)
    # The user's test module and registered helper: rewritten, their failures explained.
    output = result.stdout.str()
    assert "At index 1 diff: 2 != 3" in output and "At index 1 diff: 2 != 4" in output, output
    seen = json.loads((pytester.path / "loaders.json").read_text())
    loaders = seen["loaders"]
    # pytest did mark the package: the module loaded before the finder was in place went through its hook.
    assert loaders["pytest_agentreplay"] == "AssertionRewritingHook"
    rewritten = sorted(
        name
        for name, loader in loaders.items()
        if loader == "AssertionRewritingHook"
        and name not in ("pytest_agentreplay", "pytest_agentreplay.plugin")
    )
    assert rewritten == ["pytest_agentreplay.plain_import"], rewritten
    # The session's own modules (imported when collection ends) and the plugin's (imported with it).
    names = ("pytest_agentreplay.shell.session", "pytest_agentreplay.shell.controller")
    names += ("pytest_agentreplay.hooks",)
    for name in names:
        assert loaders[name] == "SourceFileLoader", (name, loaders[name])
    assert seen["order"].index("OwnModulesFinder") < seen["order"].index("AssertionRewritingHook")
