"""The mixed server's answer mix (what benchmarks and the README's examples run against)."""

from __future__ import annotations

from collections import Counter

from pytest_benchaudit.testing.mixed_server import realistic_mix
from pytest_benchaudit.testing.scripts import Call

QUESTIONS = [f"Question {i}: which option?" for i in range(400)]


def _ask(script, text: str, **body: object) -> str:  # type: ignore[no-untyped-def]
    reply = script(
        Call(
            path="/v1/chat/completions",
            headers={},
            attempt=1,
            body={"messages": [{"role": "user", "content": text}], **body},
        )
    )
    return str(reply.content)


def test_without_sampling_every_ask_gets_the_same_reply() -> None:
    script = realistic_mix(invalid=0.1, http_errors=0.0)
    for text in QUESTIONS[:50]:
        assert _ask(script, text, seed=1) == _ask(script, text, seed=2) == _ask(script, text)


def test_sampling_redraws_the_share_asked_for_per_seed_and_reproduces() -> None:
    """With sampling 0.5, about half the questions can change letter between seeds (a redraw keeps
    its letter a quarter of the time), each seed's answer is the same on every ask, and a greedy
    request (temperature 0) is never redrawn."""
    script = realistic_mix(invalid=0.0, http_errors=0.0, sampling=0.5)
    changed = sum(_ask(script, t, seed=1) != _ask(script, t, seed=2) for t in QUESTIONS)
    # Expected share: 0.5 sampled x P(two independent draws of 4 letters differ) 0.75 = 0.375.
    assert 0.30 < changed / len(QUESTIONS) < 0.45
    assert all(_ask(script, t, seed=7) == _ask(script, t, seed=7) for t in QUESTIONS[:50])
    assert all(_ask(script, t, seed=1, temperature=0) == _ask(script, t, seed=2, temperature=0) for t in QUESTIONS[:50])
    letters = Counter(_ask(script, t, seed=3) for t in QUESTIONS)
    assert set(letters) == {f"Answer: {x}" for x in "ABCD"}
