import json

import pytest

from archive_service.common import inclusion


def test_a_recorded_inclusion_reads_back(tmp_path):
    inclusion.record(tmp_path, "included", "urlib.net", "status.archive included")
    got = inclusion.read(tmp_path)
    assert (got.state, got.resolver, got.detail) == (
        "included",
        "urlib.net",
        "status.archive included",
    )
    assert got.time > 0


def test_nothing_recorded_or_damaged_reads_as_none(tmp_path):
    assert inclusion.read(tmp_path) is None
    (tmp_path / inclusion.FILE).write_text("{not json")
    assert inclusion.read(tmp_path) is None
    (tmp_path / inclusion.FILE).write_text(json.dumps({"resolver": "x"}))
    assert inclusion.read(tmp_path) is None


def test_an_unknown_state_is_a_programming_error(tmp_path):
    with pytest.raises(ValueError):
        inclusion.record(tmp_path, "maybe")


def test_an_unwritable_state_dir_does_not_raise(tmp_path):
    inclusion.record(tmp_path / "missing" / "dir", "failed")
    assert inclusion.read(tmp_path / "missing" / "dir") is None
