"""MkDocs hook: a page that another area of this round is still writing (mkdocs.yml `extra.pending_pages`) gets a
one-line stand-in in the built site until it lands, so `mkdocs build --strict` checks every other page and link.

Only pages on that list are stood in for: a nav entry or link to any other missing page still fails the strict
build. Nothing is written to docs/; the stand-in exists only in the built site and says what it is.
"""

from __future__ import annotations

import logging

from mkdocs.structure.files import File, Files

log = logging.getLogger("mkdocs.hooks.pending_pages")


def on_files(files: Files, config) -> Files:
    for page in config.extra.get("pending_pages") or []:
        if files.get_file_from_path(page) is None:
            title = page.removesuffix(".md").replace("-", " ").capitalize()
            files.append(File.generated(config, page, content=(
                f"# {title}\n\nThis page is being written in its area's branch of this round and lands with it "
                f"(mkdocs.yml lists it under `extra.pending_pages` until then).\n")))
            log.info("pending page %s: a stand-in until it lands", page)
    return files
