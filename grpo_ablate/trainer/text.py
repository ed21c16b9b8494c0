"""What a prompt or completion says, whether TRL hands over a string or chat messages.

Rewards score it and the metrics recorder writes it to groups.jsonl; both read it here.
"""

from __future__ import annotations

from typing import Any

__all__ = ["plain_text"]


def plain_text(value: Any) -> str:
    """A string as is; chat messages as the last message's content (text blocks joined)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and isinstance(value[-1], dict):
        content = value[-1].get("content", "")
        if isinstance(content, list):  # content blocks
            return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
        return str(content)
    return str(value)
