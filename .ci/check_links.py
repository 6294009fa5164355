#!/usr/bin/env python3
"""Checks the links of the book (docs/src/**/*.md) and of README.md. Standard library only.

Run by .ci/book.sh; by hand: `python3 .ci/check_links.py [--html target/book]`.

- Every relative link or image of a chapter names a file inside docs/src; a link to a markdown
  file names a chapter listed in docs/src/SUMMARY.md (mdBook renders nothing else), and every
  chapter SUMMARY.md lists exists.
- A link with `#anchor` names a heading of its target, by mdBook's rule for heading ids: the
  heading's text (inline code, emphasis and links reduced to their text, HTML tags and the
  entities &lt; &gt; &amp; &quot; &#39; dropped), trimmed; then every alphanumeric character
  (ASCII lowercased), `_` and `-` kept, every white-space character made a `-`, everything else
  dropped; a repeated id on one page gets `-1`, `-2`, ... (Checked against mdbook 0.4.52's
  pages: the same id for each of the book's headings, and for repeats, `&`, quotes, tags,
  emphasis, links, `8.x` and non-ASCII letters in a heading.)
- `{{#include FILE}}` and `{{#include FILE:ANCHOR}}` are expanded as mdBook expands them, so the
  headings and links of included text count for the chapter that includes it.
- Every relative link of README.md names an existing file of the repository; into a markdown
  file with `#anchor`, an existing heading of it (the same rule).
- With `--html DIR` (the built book), every anchor a chapter links to must also be an `id` in
  the page mdBook wrote, which holds this script's rule to mdBook's own.

Exit status 1 with one line per broken link, 0 when every link resolves.
"""
import argparse
import html
import os
import re
import sys
from pathlib import Path
from urllib.parse import unquote

ROOT = Path(__file__).resolve().parent.parent
BOOK_SRC = ROOT / "docs" / "src"

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*(?:[ \t]#+[ \t]*)?$")
INCLUDE = re.compile(r"\{\{#include\s+([^}\s]+)\s*\}\}")
ANCHOR_START = re.compile(r"ANCHOR:\s*([\w_-]+)")
ANCHOR_END = re.compile(r"ANCHOR_END:\s*([\w_-]+)")
CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
# [text](dest "title") and ![alt](dest); text may hold one level of brackets (an image in a link)
INLINE_LINK = re.compile(r"!?\[((?:[^\[\]]|\[[^\]]*\])*)\]\(\s*(<[^>]*>|[^)\s]*)(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(\S+)")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
CUSTOM_ID = re.compile(r"\s*\{#([^}\s]+)\}\s*$")


def expand_includes(path: Path, text: str, depth: int = 0) -> str:
    """The chapter's text with every {{#include}} replaced by what mdBook puts in its place."""
    if depth > 10:
        raise SystemExit(f"{path}: includes nested more than 10 deep")

    def include(match: re.Match) -> str:
        spec = match.group(1)
        file_part, _, anchor = spec.partition(":")
        target = (path.parent / file_part).resolve()
        if not target.is_file():
            raise IncludeError(f"{rel(path)}: {{{{#include {spec}}}}} names no file")
        content = target.read_text(encoding="utf-8")
        if anchor and not anchor.isdigit() and not re.fullmatch(r"\d*:\d*", anchor):
            kept, inside, found = [], False, False
            for line in content.splitlines():
                if inside:
                    end = ANCHOR_END.search(line)
                    if end and end.group(1) == anchor:
                        break
                    if not ANCHOR_START.search(line):
                        kept.append(line)
                else:
                    start = ANCHOR_START.search(line)
                    if start and start.group(1) == anchor:
                        inside, found = True, True
            if not found:
                raise IncludeError(f"{rel(path)}: {{{{#include {spec}}}}}: no anchor {anchor!r}")
            content = "\n".join(kept)
        return expand_includes(target, content, depth + 1)

    return INCLUDE.sub(include, text)


class IncludeError(Exception):
    pass


def outside_code(text: str):
    """Yields (line number, line) for the lines outside fenced code blocks."""
    fence = None
    for number, line in enumerate(text.splitlines(), 1):
        opening = FENCE.match(line)
        if fence is None:
            if opening:
                fence = opening.group(1)
                continue
            yield number, line
        elif opening and opening.group(1)[0] == fence[0] and len(opening.group(1)) >= len(fence) \
                and line.strip() == opening.group(1):
            fence = None


def normalize_id(content: str) -> str:
    out = []
    for ch in content:
        if ch.isalnum() or ch in "_-":
            out.append(ch.lower() if ch.isascii() else ch)
        elif ch.isspace():
            out.append("-")
    return "".join(out)


def heading_text(markdown: str) -> str:
    """A heading's text as mdBook sees it once rendered and stripped of tags and entities."""
    text = CODE_SPAN.sub(lambda m: m.group(2).strip(), markdown)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links and images: their text
    text = re.sub(r"<[^>]*>", "", text)  # raw HTML tags
    text = re.sub(r"(\*{1,3})(\S.*?\S|\S)\1", r"\2", text)  # emphasis with *
    text = html.unescape(text) if "&" in text and ";" in text else text
    return text.strip().lstrip("#").strip()


def heading_ids(text: str) -> set:
    ids, seen = set(), {}
    for _, line in outside_code(text):
        match = HEADING.match(line)
        if not match:
            continue
        content = match.group(2)
        custom = CUSTOM_ID.search(content)
        if custom:
            ids.add(custom.group(1))
            continue
        base = normalize_id(heading_text(content))
        count = seen.get(base, 0)
        seen[base] = count + 1
        ids.add(base if count == 0 else f"{base}-{count}")
    return ids


def blocks(text: str):
    """Yields (first line number, text) for each run of non-blank lines outside code blocks, so
    that a link wrapped over two lines is found whole."""
    start, lines, previous = None, [], None
    for number, line in outside_code(text):
        if not line.strip() or (previous is not None and number != previous + 1):
            if lines:
                yield start, "\n".join(lines)
            start, lines = None, []
        if line.strip():
            if start is None:
                start = number
            lines.append(line)
        previous = number
    if lines:
        yield start, "\n".join(lines)


def links(text: str):
    """Yields (line number, destination) for every link, image and reference definition."""
    for first, block in blocks(text):
        for offset, line in enumerate(block.split("\n")):
            definition = REFERENCE_DEF.match(line)
            if definition:
                yield first + offset, definition.group(1)
        # code spans blanked out (same length, newlines kept) so that their text is no link
        plain = CODE_SPAN.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), block)
        for match in INLINE_LINK.finditer(plain):
            dest = match.group(2)
            if dest.startswith("<") and dest.endswith(">"):
                dest = dest[1:-1]
            yield first + plain.count("\n", 0, match.start()), dest


def rel(path: Path) -> str:
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return str(path)


def summary_chapters() -> set:
    summary = BOOK_SRC / "SUMMARY.md"
    chapters = set()
    for _, dest in links(summary.read_text(encoding="utf-8")):
        if dest and not SCHEME.match(dest):
            chapters.add((BOOK_SRC / unquote(dest.split("#", 1)[0])).resolve())
    return chapters


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--html", type=Path, help="the built book, to check anchors against")
    args = parser.parse_args()

    errors = []
    texts, ids = {}, {}

    def load(path: Path) -> str:
        path = path.resolve()
        if path not in texts:
            raw = path.read_text(encoding="utf-8")
            try:
                texts[path] = expand_includes(path, raw) if is_chapter(path) else raw
            except IncludeError as err:
                errors.append(str(err))
                texts[path] = raw
            ids[path] = heading_ids(texts[path])
        return texts[path]

    def is_chapter(path: Path) -> bool:
        return BOOK_SRC in path.resolve().parents

    chapters = summary_chapters()
    for chapter in sorted(chapters):
        if not chapter.is_file():
            errors.append(f"docs/src/SUMMARY.md: lists {rel(chapter)}, which does not exist")

    sources = sorted(p.resolve() for p in BOOK_SRC.rglob("*.md")) + [ROOT / "README.md"]
    anchors_to_check = []  # (source, line, target chapter, fragment) for --html
    checked = 0
    for source in sources:
        text = load(source)
        for line, dest in links(text):
            if not dest or SCHEME.match(dest) or dest.startswith("//"):
                continue
            checked += 1
            where = f"{rel(source)}:{line}: {dest}"
            path_part, _, fragment = dest.partition("#")
            target = (source.parent / unquote(path_part)).resolve() if path_part else source
            if not target.exists():
                errors.append(f"{where}: no such file {rel(target)}")
                continue
            if is_chapter(source):
                if not is_chapter(target) and target != BOOK_SRC:
                    errors.append(f"{where}: leaves docs/src (the built book would not have it)")
                    continue
                if target.suffix == ".md" and target.name != "SUMMARY.md" and target not in chapters:
                    errors.append(f"{where}: {rel(target)} is not a chapter of SUMMARY.md")
                    continue
            if fragment:
                if target.suffix != ".md":
                    errors.append(f"{where}: an anchor into a file that is not markdown")
                    continue
                load(target)
                if fragment not in ids[target]:
                    known = ", ".join(sorted(ids[target])) or "none"
                    errors.append(f"{where}: no heading #{fragment} in {rel(target)} (ids: {known})")
                elif is_chapter(target):
                    anchors_to_check.append((where, target, fragment))

    if args.html:
        built = args.html.resolve()
        for where, target, fragment in anchors_to_check:
            page = built / target.relative_to(BOOK_SRC).with_suffix(".html")
            if not page.is_file():
                errors.append(f"{where}: mdBook wrote no page {rel(page)}")
                continue
            if f'id="{fragment}"' not in page.read_text(encoding="utf-8"):
                errors.append(f"{where}: mdBook's page {rel(page)} has no id {fragment!r}")

    for error in errors:
        print(f"broken link: {error}", file=sys.stderr)
    print(f"links: {checked} checked in {len(sources)} files, {len(anchors_to_check)} anchors"
          f"{' (also against the built pages)' if args.html else ''}, {len(errors)} broken")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
