"""The JSON drift report and its published JSON Schema (``report/schema.json``)."""

from __future__ import annotations

import importlib
import json
from importlib import resources
from typing import Any

from ..core.canonical import dumps_pretty
from ..core.documents import Document
from .summary import SessionReport

SCHEMA_FILE = "schema.json"
REPORT_FORMAT = "pytest-agentreplay-report"
# 3: pytest's own outcomes as statuses (error, xfailed, xpassed), reruns, and the summary's differences
# split by what they do to the run (expected differences named so).
REPORT_VERSION = 3


def report_json_schema() -> Document:
    """The JSON Schema (draft 2020-12) every JSON report validates against."""
    text = resources.files(__package__).joinpath(SCHEMA_FILE).read_text(encoding="utf-8")
    schema: Document = json.loads(text)
    return schema


def render_json(report: SessionReport) -> str:
    doc: Document = {
        "format": REPORT_FORMAT,
        "version": REPORT_VERSION,
        "summary": report.summary,
        "tests": [t.to_dict() for t in report.tests],
        "unused": report.unused,
        "next_steps": report.next_steps,
    }
    if report.network is not None:
        doc["network"] = report.network._asdict()
    if report.comparison is not None:
        doc["comparison"] = report.comparison.to_dict()
    return dumps_pretty(doc)


def validate_report(doc: object) -> list[str]:
    """Schema problems of a report document (empty when valid); needs ``jsonschema``."""
    jsonschema: Any = importlib.import_module("jsonschema")
    validator = jsonschema.Draft202012Validator(report_json_schema())
    return [
        f"{'/'.join(map(str, error.absolute_path)) or '(root)'}: {error.message}"
        for error in sorted(validator.iter_errors(doc), key=lambda e: list(map(str, e.absolute_path)))
    ]
