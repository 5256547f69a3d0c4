"""Shared set-up of the test suite.

pytester's in-process sessions drop every module an inner session imported first. A lazily imported
module of this package (an HTTP interceptor, the runtime-values patcher) first loaded inside an inner
session would come back as a second copy in the next test, beside patches the first copy still owns, and
tests would pass or fail by file order. Loading them here, once, in the outer process keeps one copy.
"""

from __future__ import annotations

import pytest_agentreplay.runtime_values  # noqa: F401
from pytest_agentreplay.http import install

install()()
