"""The JSON drift report and its published JSON Schema (``report/schema.json``)."""

from __future__ import annotations

import importlib
import json
from collections.abc import Mapping
from importlib import resources
from typing import Any

from ..core.canonical import dumps_pretty
from ..core.documents import Document

SCHEMA_FILE = "schema.json"


def report_json_schema() -> Document:
    """The JSON Schema (draft 2020-12) every JSON report validates against."""
    text = resources.files(__package__).joinpath(SCHEMA_FILE).read_text(encoding="utf-8")
    schema: Document = json.loads(text)
    return schema


def render_json(doc: Mapping[str, object]) -> str:
    return dumps_pretty(dict(doc))


def validate_report(doc: object) -> list[str]:
    """Schema problems of a report document (empty when valid); needs ``jsonschema``."""
    jsonschema: Any = importlib.import_module("jsonschema")
    validator = jsonschema.Draft202012Validator(report_json_schema())
    return [
        f"{'/'.join(map(str, error.absolute_path)) or '(root)'}: {error.message}"
        for error in sorted(validator.iter_errors(doc), key=lambda e: list(map(str, e.absolute_path)))
    ]
