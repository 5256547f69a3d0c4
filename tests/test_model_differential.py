"""The pydantic records against the verdicts of the validator they replaced.

``tests/data/record_verdicts.json`` was written by the home-made validator (``core/model.py`` at commit
2be4d30, before the records moved to pydantic) over a corpus built from one valid value per record:
every field and nested field set to each of a list of wrong values (None, bools, numbers, strings, lists,
objects), each key deleted, an unknown key added at every object level, a field under both its names.
Per case it holds the verdict and, for a refusal, each problem's field path and kind; for an acceptance,
the sha256 of the dump (JSON names, ``None`` left out, in field order). The file is frozen: the validator
that wrote it is gone, so these tests keep their meaning as the records change.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from pytest_agentreplay.core import events

CORPUS = json.loads((Path(__file__).parent / "data" / "record_verdicts.json").read_text())
RECORDS = sorted({case["record"] for case in CORPUS["cases"]})


def _mutated(case: dict[str, Any]) -> Any:
    _, base = CORPUS["bases"][case["base"]]
    value = copy.deepcopy(base)
    for op, path, *new in case["ops"]:
        holder = value
        for part in path[:-1]:
            holder = holder[part]
        if op == "del":
            del holder[path[-1]]
        else:
            holder[path[-1]] = new[0]
    return value


def _verdict(record: type[BaseModel], value: Any) -> dict[str, Any]:
    try:
        built = record.model_validate(value)
    except ValidationError as exc:
        return {"valid": False, "errors": Counter((tuple(e["loc"]), e["type"]) for e in exc.errors())}
    dump = json.dumps(built.model_dump(by_alias=True, exclude_none=True))
    return {"valid": True, "dump_sha256": hashlib.sha256(dump.encode()).hexdigest()}


def test_the_corpus_covers_every_record_and_both_verdicts() -> None:
    counts = Counter((case["record"], case["valid"]) for case in CORPUS["cases"])
    assert set(RECORDS) == {
        "CassetteDoc",
        "EffectInfo",
        "Event",
        "PayloadRef",
        "RunMeta",
        "RuntimeValuesData",
        "ToolInfo",
    }
    for record in RECORDS:
        assert counts[record, True] >= 1 and counts[record, False] >= 20, (record, counts)
    kinds = Counter(kind for case in CORPUS["cases"] for _, kind in case.get("errors", []))
    for kind in (
        "missing",
        "extra_forbidden",
        "int_type",
        "string_type",
        "bool_type",
        "literal_error",
        "model_type",
        "dict_type",
        "list_type",
        "greater_than_equal",
        "string_pattern_mismatch",
    ):
        assert kinds[kind] >= 1, kind


@pytest.mark.parametrize("record", RECORDS)
def test_the_records_give_the_old_verdicts_and_name_the_same_fields(record: str) -> None:
    model = getattr(events, record)
    wrong = []
    checked = 0
    for case in CORPUS["cases"]:
        if case["record"] != record:
            continue
        checked += 1
        got = _verdict(model, _mutated(case))
        if case["valid"]:
            # A whole cassette's dump is the events' (checked as Events); its digest was not kept.
            expected = {"valid": True, "dump_sha256": case["dump_sha256"] or got.get("dump_sha256")}
        else:
            expected = {"valid": False, "errors": Counter((tuple(loc), kind) for loc, kind in case["errors"])}
        if got != expected:
            wrong.append((case["ops"], expected, got))
    assert checked and not wrong, f"{len(wrong)} of {checked} differ, first: {wrong[:3]}"


def test_every_refused_case_names_a_field_path_inside_the_record() -> None:
    """A refusal always says where: a non-empty path, starting with a field (or JSON) name of the record
    or, for an unknown key, that key."""
    for case in CORPUS["cases"]:
        if case["valid"]:
            continue
        model = getattr(events, case["record"])
        names = {*model.model_fields, "class", "surprise"}
        with pytest.raises(ValidationError) as info:
            model.model_validate(_mutated(case))
        for error in info.value.errors():
            assert error["loc"] and error["loc"][0] in names, (case["ops"], error)
