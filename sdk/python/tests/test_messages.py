"""The model-facing messages the adapters use are those of sdk/vectors.json
"model_messages" (no server needed)."""

from __future__ import annotations

import json
from pathlib import Path

from arbiter.messages import MESSAGES, model_message

VECTORS = json.loads((Path(__file__).resolve().parents[2] / "vectors.json").read_text())


def test_messages_are_the_vectors_copy() -> None:
    assert MESSAGES == VECTORS["model_messages"]["messages"]


def test_placeholders_are_filled() -> None:
    text = model_message("pending_approval", "", None)
    assert "the Arbiter dashboard" in text and "{" not in text and text.endswith(").")
    assert model_message("denied", "too large").endswith("refused. too large")


def test_a_placeholder_inside_the_text_goes_with_its_colon_when_empty() -> None:
    assert "(a freeze)." in model_message("frozen", "")
    assert "(a freeze: provider incident)." in model_message("frozen", "provider incident", "u")
