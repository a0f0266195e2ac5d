"""The indented code blocks of one section of a Markdown file (imported by the docs checks)."""


def section_blocks(text, heading):
    """The indented code blocks of the section `heading` (a whole heading line, e.g. "### P/D
    mode") up to the next heading, each a list of lines without the 4-space indent; None when
    `text` has no such section."""
    start = text.find(heading + "\n")
    if start < 0:
        return None
    end = text.find("\n#", start + len(heading))
    out, current = [], None
    for line in text[start + len(heading):end if end >= 0 else len(text)].split("\n"):
        if line.startswith("    "):
            if current is None:
                current = []
                out.append(current)
            current.append(line[4:])
        elif line.strip():
            current = None
    return out
