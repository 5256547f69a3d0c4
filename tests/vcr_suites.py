"""A small pytest-recording suite as teams have them, written into a folder: its conftest registers a custom
vcrpy matcher through pytest-recording's ``pytest_recording_configure`` hook and sets a ``persister`` in
``vcr_config``, its ini ``addopts`` hold ``--block-network --record-mode=none``, and its cassettes are
vcrpy's YAML (format version 1), written by hand, where its persister reads them (``tests/recorded/``, not
pytest-recording's ``tests/cassettes/``).

Every part is needed: without the hook the conftest does not load (``unknown hook``), without the options
pytest refuses the command line, without the persister no cassette is found, without the matcher the two
requests (same URL, told apart by a header only) get each other's answers.

Used by the pytester tests (``test_vcr_recording_options.py``) and by the runs under pytest-recording itself
(``test_vcr_suite_migration.py``), which must agree.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import yaml

CONFTEST = '''
import pytest
from vcr.persisters.filesystem import FilesystemPersister


def case_header(r1, r2):
    assert r1.headers.get("x-case") == r2.headers.get("x-case"), "x-case differs"


def pytest_recording_configure(config, vcr):
    vcr.register_matcher("case_header", case_header)


class ElsewherePersister:
    """The project keeps its cassettes in recorded/ (pytest-recording names them under cassettes/)."""

    @staticmethod
    def moved(cassette_path):
        return str(cassette_path).replace("/cassettes/", "/recorded/")

    @classmethod
    def load_cassette(cls, cassette_path, serializer):
        return FilesystemPersister.load_cassette(cls.moved(cassette_path), serializer)

    @classmethod
    def save_cassette(cls, cassette_path, cassette_dict, serializer):
        FilesystemPersister.save_cassette(cls.moved(cassette_path), cassette_dict, serializer)


@pytest.fixture(scope="module")
def vcr_config():
    return {
        "persister": ElsewherePersister,
        "match_on": ["method", "scheme", "host", "port", "path", "case_header"],
        "filter_headers": ["authorization"],
    }
'''

TESTS = """
import httpx
import pytest


@pytest.mark.vcr
def test_cases_answer_in_any_order():
    second = httpx.get("{url}/case", headers={{"x-case": "two"}}).json()
    first = httpx.get("{url}/case", headers={{"x-case": "one"}}).json()
    assert (first, second) == ({{"case": 1}}, {{"case": 2}})


@pytest.mark.vcr
def test_status():
    assert httpx.get("{url}/status", headers={{"x-case": "status"}}).json() == {{"ok": True}}


def test_without_network():
    assert sum(range(4)) == 6
"""

PASSING = 3  # every test of the suite passes, under pytest-recording and under pytest-agentreplay


def _interaction(url: str, case: str, body: object) -> dict[str, object]:
    text = json.dumps(body)
    return {
        "request": {
            "body": None,
            "headers": {"x-case": [case], "Accept": ["*/*"]},
            "method": "GET",
            "uri": url,
        },
        "response": {
            "body": {"string": text},
            "headers": {"Content-Type": ["application/json"], "Content-Length": [str(len(text))]},
            "status": {"code": 200, "message": "OK"},
        },
    }


def write_migration_suite(root: Path, url: str) -> Path:
    """The suite under ``root`` (created), its tests calling ``url`` (never reached: replayed)."""
    tests = root / "tests"
    recorded = tests / "recorded" / "test_cases"
    recorded.mkdir(parents=True, exist_ok=True)
    (root / "pytest.ini").write_text("[pytest]\naddopts = --block-network --record-mode=none\n")
    (tests / "conftest.py").write_text(textwrap.dedent(CONFTEST).lstrip())
    (tests / "test_cases.py").write_text(textwrap.dedent(TESTS).lstrip().format(url=url))
    cases = [_interaction(f"{url}/case", "one", {"case": 1}), _interaction(f"{url}/case", "two", {"case": 2})]
    status = [_interaction(f"{url}/status", "status", {"ok": True})]
    for name, interactions in (("test_cases_answer_in_any_order", cases), ("test_status", status)):
        document = {"interactions": interactions, "version": 1}
        (recorded / f"{name}.yaml").write_text(yaml.safe_dump(document), encoding="utf-8")
    return root
