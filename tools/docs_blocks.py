"""The docs' generated blocks: text between two HTML-comment markers in a Markdown page, written by the command
that computes it, never by hand (tests/test_docs.py and tests/test_config_keys.py check each against its source).

    python tools/docs_blocks.py            # the study-file key table, from the schema (`grpo-ablate schema --markdown`)
    python tools/verdict.py --runs 1 --readme   # the demo's answer, from a real run (minutes)
    python benchmarks/report_screenshot.py      # the report's first screen, from a real run of the demo

Each block is written into every page that shows it (the demo's answer: the README and Getting started; the key
table: the study-file page alone), so the copies cannot drift apart.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

KEYS_START = "<!-- study-file-keys:start -->"
KEYS_END = "<!-- study-file-keys:end -->"
KEY_TABLE_PAGES = (ROOT / "docs" / "study-file.md",)  # the README is a front door now: it links the page


def block_of(text: str, start: str, end: str) -> str | None:
    """The block from `start` to `end`, markers included, or None when the text lacks either marker."""
    if start not in text or end not in text.split(start, 1)[1]:
        return None
    return start + text.split(start, 1)[1].split(end, 1)[0] + end


def replace_block(path: Path, start: str, end: str, block: str) -> None:
    """Write `block` (markers included) over the page's block between `start` and `end`; SystemExit when it has none."""
    text = path.read_text(encoding="utf-8")
    old = block_of(text, start, end)
    if old is None:
        raise SystemExit(f"{path} has no {start} ... {end} block to replace")
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text.replace(old, block, 1), encoding="utf-8")
    tmp.replace(path)


def key_table_block() -> str:
    """The study file's keys, one row each, as `grpo-ablate schema --markdown` prints them (config/keys.py)."""
    sys.path.insert(0, str(ROOT))
    from grpo_ablate.commands.common import key_choices
    from grpo_ablate.config.keys import key_table

    return (f"{KEYS_START}\n<!-- written by `python tools/docs_blocks.py` (`grpo-ablate schema --markdown`) from "
            f"the schema's descriptions (grpo_ablate/config/schema.py); do not edit by hand -->\n"
            f"{key_table(key_choices())}{KEYS_END}")


def main() -> int:
    block = key_table_block()
    for page in KEY_TABLE_PAGES:
        replace_block(page, KEYS_START, KEYS_END, block)
        print(f"wrote the study-file key table into {page.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
