"""env.sh without a shell: parse the assignments, never execute anything, write back faithfully.

Supported (the subset env files use): `export NAME=value` and `NAME=value`, single and double
quotes (concatenated too), backslash escapes, `$VAR` / `${VAR}` references to variables set
earlier in the file, inline `# comments`, blank lines, `#!` lines, `export NAME`. Command
substitution, backticks and any other statement are errors naming the line: nothing is run.

Lines the user did not change are written back byte for byte; a changed variable keeps its
`export`, its position and its inline comment. Files are written atomically with mode 0600.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from .atomic import write_private as write_private  # re-exported: cli and headless use it

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
ASSIGN = re.compile(r"^(?P<indent>[ \t]*)(?P<export>export[ \t]+)?(?P<name>[A-Za-z_][A-Za-z0-9_]*)=")
EXPORT_ONLY = re.compile(r"^[ \t]*export[ \t]+[A-Za-z_][A-Za-z0-9_]*[ \t]*(#.*)?$")
SHELL_OPERATORS = set(";&|<>()")


class EnvFileError(ValueError):
    """A line of env.sh that rltui will not interpret. Never carries a value."""

    def __init__(self, source: str, lineno: int, message: str, name: str | None = None) -> None:
        self.source, self.lineno, self.name, self.message = source, lineno, name, message
        where = f"{source}:{lineno}" + (f": {name}" if name else "")
        super().__init__(f"{where}: {message}")


@dataclass(frozen=True)
class Ref:
    name: str


Segment = str | Ref


@dataclass
class Assignment:
    name: str
    segments: list[Segment]
    lineno: int
    indent: str = ""
    export: bool = True
    trailer: str = ""  # what follows the value on its line: spacing and an inline comment
    raw: str | None = None  # the original line; None once the value was changed


@dataclass
class Verbatim:
    raw: str


Line = Assignment | Verbatim


def _parse_value(text: str, pos: int, source: str, lineno: int, name: str,
                 known: set[str]) -> tuple[list[Segment], int]:
    """Tokenise a bash assignment value starting at `pos`; return segments and the end."""
    segments: list[Segment] = []
    buf: list[str] = []

    def err(msg: str) -> EnvFileError:
        return EnvFileError(source, lineno, msg, name)

    def flush() -> None:
        if buf:
            segments.append("".join(buf))
            buf.clear()

    def expansion(i: int) -> int:
        # text[i] == "$"
        nxt = text[i + 1] if i + 1 < len(text) else ""
        if nxt == "(":
            raise err("command substitution $(...) is never run by rltui; write the value itself")
        if nxt == "{":
            close = text.find("}", i + 2)
            inner = text[i + 2:close] if close != -1 else ""
            if close == -1 or not NAME.fullmatch(inner):
                raise err("only ${NAME} references are supported; write the value itself")
            ref, end = inner, close + 1
        else:
            m = NAME.match(text, i + 1)
            if not m:
                if nxt and not nxt.isspace() and nxt not in "\"'":
                    raise err(f"${nxt} is not supported; write the value itself")
                buf.append("$")
                return i + 1
            ref, end = m.group(0), m.end()
        if ref not in known:
            raise err(f"refers to ${ref}, which is not set earlier in this file")
        flush()
        segments.append(Ref(ref))
        return end

    i = pos
    while i < len(text):
        c = text[i]
        if c in " \t":
            break
        if c == "'":
            close = text.find("'", i + 1)
            if close == -1:
                raise err("unterminated single quote")
            buf.append(text[i + 1:close])
            i = close + 1
        elif c == '"':
            i += 1
            while True:
                if i >= len(text):
                    raise err("unterminated double quote")
                d = text[i]
                if d == '"':
                    i += 1
                    break
                if d == "\\" and i + 1 < len(text) and text[i + 1] in '$`"\\':
                    buf.append(text[i + 1])
                    i += 2
                elif d == "`":
                    raise err("backticks run a command, which rltui never does; write the value itself")
                elif d == "$":
                    i = expansion(i)
                else:
                    buf.append(d)
                    i += 1
        elif c == "\\":
            if i + 1 >= len(text):
                raise err("a line continuation is not supported; keep the value on one line")
            buf.append(text[i + 1])
            i += 2
        elif c == "`":
            raise err("backticks run a command, which rltui never does; write the value itself")
        elif c == "$":
            i = expansion(i)
        elif c in SHELL_OPERATORS:
            raise err(f"{c!r} is a shell operator; quote the value")
        elif c == "~" and i == pos:
            raise err("~ is expanded by the shell; write the full path")
        else:
            buf.append(c)
            i += 1
    flush()
    return segments, i


def _parse_line(text: str, lineno: int, source: str, known: set[str]) -> Line:
    stripped = text.strip()
    if not stripped or stripped.startswith("#"):
        return Verbatim(text)
    if EXPORT_ONLY.match(text):
        return Verbatim(text)
    m = ASSIGN.match(text)
    if not m:
        word = stripped.split()[0]
        raise EnvFileError(source, lineno, f"`{word}` is a command; env.sh may hold only"
                           " NAME=value assignments (rltui never runs it)")
    name = m.group("name")
    segments, end = _parse_value(text, m.end(), source, lineno, name, known)
    trailer = text[end:]
    if trailer.strip() and not trailer.lstrip().startswith("#"):
        raise EnvFileError(source, lineno, "unexpected text after the value; quote values that"
                           " contain spaces", name)
    return Assignment(name=name, segments=segments, lineno=lineno, indent=m.group("indent"),
                      export=bool(m.group("export")), trailer=trailer, raw=text)


def quote(value: str) -> str:
    """Double-quote `value` so that bash's `source` yields exactly it."""
    if "\n" in value or "\0" in value or "\r" in value:
        raise ValueError("env.sh values cannot hold line breaks or NUL characters")
    escaped = re.sub(r'([\\"$`])', r"\\\1", value)
    return f'"{escaped}"'


@dataclass
class EnvFile:
    lines: list[Line] = field(default_factory=list)
    source: str = "env.sh"
    newline_at_end: bool = True

    @classmethod
    def parse(cls, text: str, source: str = "env.sh") -> EnvFile:
        known: set[str] = set()
        lines: list[Line] = []
        raw_lines = text.split("\n")
        newline_at_end = text.endswith("\n")
        if newline_at_end:
            raw_lines.pop()
        for lineno, raw in enumerate(raw_lines, start=1):
            line = _parse_line(raw.rstrip("\r"), lineno, source, known)
            if isinstance(line, Assignment):
                line.raw = raw
                known.add(line.name)
            else:
                line.raw = raw
            lines.append(line)
        return cls(lines, source, newline_at_end or not raw_lines)

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> EnvFile:
        p = Path(path)
        try:
            data = p.read_bytes()
        except FileNotFoundError:
            raise EnvFileError(str(p), 0, "no such file; create it with `rltui` or copy"
                               " assets/env.sh.example") from None
        except IsADirectoryError:
            raise EnvFileError(str(p), 0, "is a directory, not an env.sh file") from None
        except PermissionError:
            raise EnvFileError(str(p), 0, "cannot be read: permission denied") from None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise EnvFileError(str(p), 0, "is not UTF-8 text") from None
        return cls.parse(text, source=str(p))

    # --- values ---

    def assignments(self) -> Iterable[Assignment]:
        return (line for line in self.lines if isinstance(line, Assignment))

    def values(self) -> dict[str, str]:
        """Every variable's value, as `source env.sh` would leave it."""
        env: dict[str, str] = {}
        for a in self.assignments():
            env[a.name] = "".join(env.get(s.name, "") if isinstance(s, Ref) else s for s in a.segments)
        return env

    def get(self, name: str, default: str | None = None) -> str | None:
        return self.values().get(name, default)

    def expression(self, name: str) -> str | None:
        """How the value is written (`${CLUSTER_NAME}-net-0`), for showing derived values."""
        last = None
        for a in self.assignments():
            if a.name == name:
                last = a
        if last is None:
            return None
        return "".join("${%s}" % s.name if isinstance(s, Ref) else s for s in last.segments)

    def set(self, name: str, value: str) -> None:
        """Give `name` a literal value, in place if it exists, else appended at the end."""
        quote(value)  # validates
        if not NAME.fullmatch(name):
            raise ValueError(f"{name!r} is not a variable name")
        target = None
        for a in self.assignments():
            if a.name == name:
                target = a
        if target is not None:
            if self.values().get(name) == value and not any(isinstance(s, Ref) for s in target.segments):
                return
            target.segments = [value]
            target.raw = None
            return
        self.lines.append(Assignment(name=name, segments=[value], lineno=len(self.lines) + 1))

    def update(self, values: dict[str, str]) -> None:
        """Set several variables, keeping references (e.g. NETWORK_NAME) whose value holds."""
        current = self.values()
        for name, value in values.items():
            if current.get(name) != value:
                self.set(name, value)
                current = self.values()

    # --- writing ---

    def render(self) -> str:
        out: list[str] = []
        for line in self.lines:
            if isinstance(line, Verbatim):
                out.append(line.raw)
            elif line.raw is not None:
                out.append(line.raw)
            else:
                value = "".join("${%s}" % s.name if isinstance(s, Ref) else quote(s)[1:-1]
                                for s in line.segments)
                prefix = "export " if line.export else ""
                out.append(f'{line.indent}{prefix}{line.name}="{value}"{line.trailer}')
        text = "\n".join(out)
        return text + "\n" if self.newline_at_end and out else text

    def write(self, path: str | os.PathLike[str]) -> Path:
        return write_private(Path(path), self.render())


# Set by a shell or a tool, and so possibly exported by an env.sh for itself: never taken for a
# misspelling of a variable rltui reads (HOME is two edits from ZONE).
SHELL_VARIABLES = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "PWD", "OLDPWD", "TERM", "LANG", "LANGUAGE", "TZ",
    "TMPDIR", "EDITOR", "VISUAL", "PAGER", "HOSTNAME", "DISPLAY", "MAIL", "PS1", "PS2", "IFS",
    "KUBECONFIG", "PYTHONPATH", "VIRTUAL_ENV", "HF_HOME", "RAY_ADDRESS"})
SHELL_PREFIXES = ("LC_", "XDG_", "CLOUDSDK_", "GOOGLE_", "BASH", "HIST", "RAY_AUTH_")


def edits(a: str, b: str) -> int:
    """Damerau-Levenshtein distance (optimal string alignment): insertions, deletions,
    substitutions and swaps of two neighbours, one edit each."""
    before: list[int] = []
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cur[j] = min(cur[j], before[j - 2] + 1)
        before, prev = prev, cur
    return prev[-1]


def misspelling(name: str, known: Iterable[str]) -> str | None:
    """The known name `name` misspells: the nearest within two edits (one for names of up to
    five letters: ZONE), case counting as in the shell; None for a known name, a shell's
    variable, or one further from all."""
    known = tuple(known)
    if name in known or name in SHELL_VARIABLES or name.startswith(SHELL_PREFIXES) or not known:
        return None
    near = min(known, key=lambda k: edits(name, k))   # ties: the first in `known`'s order
    return near if edits(name, near) <= (1 if len(near) <= 5 else 2) else None


def mode_problem(path: str | os.PathLike[str]) -> str | None:
    """A warning when a file holding secrets is readable by others."""
    try:
        mode = os.stat(path).st_mode & 0o777
    except OSError:
        return None
    if mode & 0o077:
        return f"{path}: mode {mode:04o} lets other users read your tokens; run: chmod 600 {path}"
    return None
