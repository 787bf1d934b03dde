"""Every citation in rltui/ and sandbox/ resolves inside the repository.

- No text file there points at the old design notes outside the repository (FACTS.md,
  shared/design, ../shared): the facts and their sources are in sandbox/SOURCES.md.
- No .py file there cites an issue number of this project ("issue 13", "issues #13, 21",
  "(#21)", "see #21"): a reader of the repository cannot follow it. Upstream references name
  their repository right before the number ("kuberay #1234", "terraform-provider-google #1643",
  "hashicorp/terraform-provider-google issue 1643", "kovidgoyal/kitty#2017"), and pass.
- Every `SOURCES.md#<anchor>` cited under rltui/, sandbox/ or docs/ is a heading of
  sandbox/SOURCES.md, as are SOURCES.md's own `(#anchor)` links.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ROOT / "sandbox" / "SOURCES.md"
TEXT_SUFFIXES = {".py", ".md", ".toml", ".json", ".yaml", ".yml", ".txt", ".cfg", ".tcss", ".sh"}


def _files(*tops: str, suffixes: set[str] = TEXT_SUFFIXES) -> list[Path]:
    out = []
    for top in tops:
        for path in sorted((ROOT / top).rglob("*")):
            parts = path.relative_to(ROOT).parts
            if (path.is_file() and path.suffix in suffixes and "__pycache__" not in parts
                    and not any(p.startswith(".") for p in parts)):
                out.append(path)
    return out


def _where(path: Path, text: str, offset: int) -> str:
    return f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, offset) + 1}"


# ---- the old design notes ----------------------------------------------------------------------

OUTSIDE = re.compile(r"FACTS\.md|\bFACTS\b|shared/design|\.\./shared")


def test_no_citation_of_the_design_notes_outside_the_repository() -> None:
    found = []
    for path in _files("rltui", "sandbox"):
        text = path.read_text(errors="replace")
        found += [f"{_where(path, text, m.start())}: {m.group(0)}" for m in OUTSIDE.finditer(text)]
    assert not found, "cite sandbox/SOURCES.md#<anchor> or the upstream source instead:\n" + "\n".join(found)


# ---- this project's issue numbers -------------------------------------------------------------

# "issue 13", "Issues #13", and a bare "#13" after a space or an opening bracket ("(#13)",
# "see #13"). Not "#555555" in a string, "PKCS#8", "x.md#1-prerequisites" or "owner/repo#13"
# (those have no space before the #, or are followed by more of a word).
ISSUE_WORD = re.compile(r"\b(?:issues?|PRs?|pull requests?)\s+#?\d+\b", re.IGNORECASE)
BARE_NUMBER = re.compile(r"(?:(?<=\s)|(?<=[(\[]))#\d+(?![\w-])")
# Between a repository's name and the number: the words "issue(s)", "PR", "pull request" and
# other numbers of a list ("kubernetes-the-hard-way #327, #684", "... issues 327, 684").
FILLER = re.compile(r"^(?:issues?|prs?|pull|requests?|and|&|#?\d+[,;]?)$", re.IGNORECASE)
# Upstream projects cited by a one-word name; any name with "/", "-", "_" or "." counts as a
# repository too ("terraform-provider-google", "rancher/gke-operator", "NeMo-RL").
ONE_WORD_REPOS = {"kuberay", "ray", "xpk", "kubernetes", "kubectl", "textual", "rich", "kitty", "grpc",
                  "containerd", "moby", "gcloud", "syrupy", "plotext", "pytest", "hypothesis", "aiohttp",
                  "protobuf", "pydantic", "wandb", "vllm", "megatron", "nemo", "termux"}


def _repository_before(text: str, start: int) -> bool:
    """Whether the words just before `start` (across a wrapped comment line) name a repository."""
    before = re.sub(r"\n\s*#?", " ", text[max(0, start - 200):start])
    for word in reversed(before.split()):
        word = word.strip("`'\"()[]{}<>:;,")
        if not word or FILLER.match(word):
            continue
        return "/" in word or "-" in word or "_" in word or "." in word or word.lower() in ONE_WORD_REPOS
    return False


def _own_issue_numbers(text: str) -> list[tuple[int, str]]:
    hits = []
    for pattern in (ISSUE_WORD, BARE_NUMBER):
        for m in pattern.finditer(text):
            if not _repository_before(text, m.start()):
                hits.append((m.start(), m.group(0)))
    return hits


@pytest.mark.parametrize(("text", "own"), [
    ("# see issue 13 for why", True),
    ("# fixed upstream (#21)", True),
    ("# Issues #13, 21 explain it", True),
    ("# as in PR #7", True),
    ("# kuberay #1234 says so", False),
    ("# (terraform-provider-google #1643)", False),
    ("# hashicorp/terraform-provider-google issue 1643 lists", False),
    ("# kubernetes-the-hard-way issues 327, 684", False),
    ("# kubernetes-the-hard-way #327, #684", False),
    ("# GKE's errors (terraform-provider-google\n# issue 1643 quotes ...)", False),
    ("# kovidgoyal/kitty#2017 and termux-app#5324", False),
    ('_BACK = Color.parse("#555555")', False),
    ("PEM (PKCS#8) of the key", False),
    ("see docs/installation.md#1-prerequisites", False),
    ("sandbox/SOURCES.md#gke-one-operation-at-a-time", False),
])
def test_the_issue_number_rule(text: str, own: bool) -> None:
    assert bool(_own_issue_numbers(text)) is own


def test_no_issue_number_of_this_project() -> None:
    found = []
    for path in _files("rltui", "sandbox", suffixes={".py"}):
        text = path.read_text(errors="replace")
        found += [f"{_where(path, text, at)}: {hit}" for at, hit in _own_issue_numbers(text)]
    assert not found, ("an issue number with no repository before it is this project's, which a reader"
                       " cannot follow: say why in the comment instead\n" + "\n".join(found))


# ---- SOURCES.md anchors ----------------------------------------------------------------------

CITED = re.compile(r"SOURCES\.md#([A-Za-z0-9_-]+)")
LOCAL_LINK = re.compile(r"\]\(#([A-Za-z0-9_-]+)\)")


def _anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation but '-' and '_' dropped, spaces -> '-'."""
    out = set()
    for line in markdown.splitlines():
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            out.add(slug)
    return out


def test_every_cited_sources_anchor_exists() -> None:
    sources = SOURCES.read_text()
    anchors = _anchors(sources)
    missing = []
    for path in _files("rltui", "sandbox", "docs"):
        text = path.read_text(errors="replace")
        missing += [f"{_where(path, text, m.start())}: #{m.group(1)}" for m in CITED.finditer(text)
                    if m.group(1) not in anchors]
    missing += [f"sandbox/SOURCES.md: (#{a})" for a in LOCAL_LINK.findall(sources) if a not in anchors]
    assert not missing, "no such row in sandbox/SOURCES.md:\n" + "\n".join(missing)


def test_sources_rows_have_sources() -> None:
    """Each row (a `## anchor` section after the index) names its sources and a status."""
    sections = re.split(r"^## ", SOURCES.read_text(), flags=re.MULTILINE)[1:]
    rows = [s for s in sections if not s.startswith("Index")]
    assert len(rows) >= 30
    for row in rows:
        name = row.splitlines()[0]
        assert "- Sources:" in row, f"{name}: no '- Sources:' line"
        assert "- Status:" in row, f"{name}: no '- Status:' line"
