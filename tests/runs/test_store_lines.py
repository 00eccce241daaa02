"""records.jsonl lines: secrets masked exactly as redact_obj masks them, with or without the fast path."""

from __future__ import annotations

import orjson
import pytest

from pytest_benchaudit.common import secrets
from pytest_benchaudit.common.secrets import redact_obj
from pytest_benchaudit.runs.store import _record_line


@pytest.mark.parametrize(
    "secret",
    ["sk-plain-0123456789", 'sk-with"quote-0123', "sk-back\\slash-0123", "sk-ctrl\x01char-0123", "sk-ünïcode-0123456"],
)
def test_record_line_masks_as_redact_obj(monkeypatch: pytest.MonkeyPatch, secret: str) -> None:
    monkeypatch.setattr(secrets, "_values", {secret})
    records = [
        {"raw_output": f"the key is {secret}.", "request": {"messages": [{"content": "no key here"}]}},
        {"raw_output": "clean", "usage": {"tokens": 3}, "error": None, "earlier_outputs": []},
        {f"key {secret}": 1, "nested": [[f"{secret}{secret}"], ("tuple", secret)]},
    ]
    for record in records:
        assert _record_line(record) == orjson.dumps(redact_obj(record)).decode()
        assert secret not in _record_line(record)


def test_record_line_without_secrets_is_the_plain_dump(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(secrets, "_values", set())
    monkeypatch.setattr(secrets, "_names", set())
    record = {"a": "text", "b": [1, 2.5, None, True]}
    assert _record_line(record) == orjson.dumps(record).decode()
