"""The docs check's rules on text, beside its flag and path checks (checks.py): each long doc
under its line budget; no text in the repository that speaks of how the work on it was
organised (work sessions, tracker issues, machines lent for a while) rather than of the
project; and every relative Markdown link leading to a file that exists and, with a #fragment,
to one of that file's headings. Each problem is one line naming the file and line."""

import fnmatch
import os
import re

# The long documents' budgets, in lines: a newcomer reads them, so they stay short.
LINE_BUDGETS = {"README.md": 170, "docs/ARCHITECTURE.md": 450, "docs/RESULTS.md": 700,
                "docs/BENCHMARKS.md": 700}

# Words that speak of how the work was organised. Matched case-insensitively on whole words.
WORK_TALK = (
    r"sessions?",               # a work session (technical uses: WORK_TALK_ALLOWED)
    r"issues? ?#?\d+",          # a tracker issue by number
    r"the issue(?:'s)?",        # "the goal"
    r"\(issues?:",              # "(issue: Core)"
    r"lent",                    # a machine lent
    r"not[ _]drawn",            # the device tool's word
    r"device (?:time|tool)",
    r"\.?gpu_carry",
)
# Technical uses of those words, each with its reason: (files, pattern, reason); a match inside
# the pattern's match, in a file the glob takes, is fine. (Inside a name, as in ClientSession,
# client_session or start_new_session, the words are not matched at all.)
WORK_TALK_ALLOWED = (
    ("*", r"(?:its|their|a) own session|a session of its own|ssh session",
     "a process group (setsid) or an ssh connection"),
    ("worker/*", r"\bsessions?(?:_|'s)?",
     "a WorkerSession (a worker's life in the job) or the ClientSession a Python Worker holds"),
    ("common/book_frame.*", r"\blent\b", "a ZeroMQ frame lent to replies without a copy"),
    ("scheduler/register_replies.h", r"\blent\b", "the address book's frame, lent likewise"),
)
WORK_TALK_RE = re.compile(r"(?<![\w])(?:%s)(?![\w])" % "|".join(WORK_TALK), re.I)
# Where such words may stand: the tests, which check for them.
WORK_TALK_EXEMPT = ("tests/",)

LINK = re.compile(r"!?\[[^\]]*\]\(([^()\s]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")


def over_budget(docs, budgets=None):
    """'PATH: N lines, over its budget of B' for each doc in `docs` ({path: text}) over its
    line budget."""
    budgets = LINE_BUDGETS if budgets is None else budgets
    problems = []
    for path, budget in sorted(budgets.items()):
        if path in docs:
            n = docs[path].count("\n")
            if n > budget:
                problems.append(f"{path}: {n} lines, over its budget of {budget}")
    return problems


def work_talk(path, text):
    """'PATH:LINE: "WORDS" ...' for each place in `text` that speaks of how the work was
    organised (WORK_TALK) outside the technical uses (WORK_TALK_ALLOWED)."""
    patterns = [re.compile(p, re.I) for files, p, _ in WORK_TALK_ALLOWED
                if fnmatch.fnmatch(path, files)]
    problems = []
    for n, line in enumerate(text.split("\n"), 1):
        allowed = [m.span() for p in patterns for m in p.finditer(line)]
        for m in WORK_TALK_RE.finditer(line):
            if any(a <= m.start() and m.end() <= b for a, b in allowed):
                continue
            problems.append(f"{path}:{n}: \"{m.group(0)}\" speaks of how the work was "
                            f"organised, not of the project: {line.strip()[:100]}")
    return problems


def anchor(heading):
    """GitHub's anchor of a Markdown heading's text: code spans and links read as their text,
    lowercase, spaces to '-', punctuation other than '-' and '_' dropped."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    text = text.strip().lower().replace(" ", "-")
    return "".join(c for c in text if c.isalnum() or c in "-_")


def anchors(text):
    """The set of anchors of a Markdown text's headings (outside fenced blocks), repeated
    headings numbered -1, -2, ... as GitHub numbers them."""
    found, counts, fenced = set(), {}, False
    for line in text.split("\n"):
        if FENCE.match(line):
            fenced = not fenced
            continue
        m = None if fenced else HEADING.match(line)
        if m:
            base = anchor(m.group(2))
            k = counts.get(base, 0)
            counts[base] = k + 1
            found.add(base if k == 0 else f"{base}-{k}")
    return found


def broken_links(docs, root):
    """'PATH:LINE: ...' for every relative link in `docs` ({path relative to root: text})
    whose file is not in ROOT, or whose #fragment is none of that file's headings."""
    problems = []
    for path, text in sorted(docs.items()):
        fenced = False
        for n, line in enumerate(text.split("\n"), 1):
            if FENCE.match(line):
                fenced = not fenced
            if fenced:
                continue
            for target in LINK.findall(line):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
                    continue
                problem = _link_problem(path, target, docs, root)
                if problem:
                    problems.append(f"{path}:{n}: {target}: {problem}")
    return problems


def _link_problem(path, target, docs, root):
    file_part, _, fragment = target.partition("#")
    linked = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part \
        else path
    if linked not in docs and not os.path.exists(os.path.join(root, linked)):
        return "no such file"
    if not fragment:
        return None
    text = docs.get(linked)
    if text is None:
        try:
            with open(os.path.join(root, linked)) as f:
                text = f.read()
        except (OSError, UnicodeDecodeError):
            return "a #fragment into a file that is not Markdown"
    if fragment not in anchors(text):
        return f"no heading of {linked} has the anchor #{fragment}"
    return None
