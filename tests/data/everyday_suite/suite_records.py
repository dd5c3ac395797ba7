import json

import pytest

RECORDS = [{"id": i, "name": f"item{i}", "tags": list(range(i % 7))} for i in range(200)]


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: str(r["id"]))
def test_roundtrip(record):
    assert json.loads(json.dumps(record)) == record


@pytest.mark.parametrize("width", range(60))
def test_format_width(width):
    text = f"{width:>{width + 1}}"
    assert len(text) == width + 1 and text.strip() == str(width)


def test_sorted_keys():
    assert list(json.loads(json.dumps({"b": 1, "a": 2}, sort_keys=True))) == ["a", "b"]


def test_fails_on_purpose():
    assert json.dumps([1, 2]) == "[1,2]"  # json puts a space after the comma


@pytest.mark.xfail(reason="known bug", strict=True)
def test_known_bug():
    assert json.loads("1e400") == 0
