"""`bash SCRIPT ARGS...` on a sandbox Ray head, seeing the head container's paths.

On GKE the codelab's job runs in the head pod's container: `bash run_nemo_rl.sh` there does
`cd /opt/nemo-rl` (the nemo-rl image's checkout) and writes under `/lustre` (the
PersistentVolumeClaim's mountPath in the codelab's ray-cluster.yaml). The sandbox's head is a
local process with no container filesystem: headpod.py hands it those two places as
NEMO_RL_DIR and LUSTRE_MOUNT. The `bash` on the head's PATH (install.py writes it) therefore
reads a script it is given, puts those folders where the script names /opt/nemo-rl or /lustre
as a path, and runs the result with the real bash (`bash -c TEXT SCRIPT ARGS...`, so $0 and
the arguments are unchanged). Anything else, or a script naming neither, goes to the real bash
untouched. Paths inside runtime-env variables (the codelab's HF_HOME=/lustre/...) are not
rewritten: the sandbox's GRPO demo downloads no model and reads HF_HOME only for a token file.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Mapping

# (the container's path, the head's variable naming the local folder behind it)
MOUNTS = (("/opt/nemo-rl", "NEMO_RL_DIR"), ("/lustre", "LUSTRE_MOUNT"))
_SAFE = re.compile(r"[A-Za-z0-9_./@%+=:,-]+")


def _pattern(path: str) -> re.Pattern[str]:
    # The path itself or a path below it, not a longer name (/lustre2, /opt/nemo-rl-old).
    return re.compile(r"(?<![\w./-])" + re.escape(path) + r"(?![\w.-])")


def _spelled(local: str, var: str, quoting: str) -> str:
    """The local folder as the script should name it where it is written: the folder itself when
    it needs no quoting, else a "${VAR}" expansion fitting the quotes around it."""
    if _SAFE.fullmatch(local):
        return local
    return {"": f'"${{{var}}}"', '"': f"${{{var}}}", "'": f"'\"${{{var}}}\"'"}[quoting]


def rewrite(text: str, environ: Mapping[str, str]) -> str:
    """`text` with each container path replaced by its local folder. The quoting around each is
    followed as sh reads it (single and double quotes, backslash escapes; heredoc bodies are
    read as script, which matters only for a folder that needs quoting)."""
    subs = [(_pattern(path), environ[var], var) for path, var in MOUNTS if environ.get(var)]
    out: list[str] = []
    quoting, i = "", 0
    while i < len(text):
        for pattern, local, var in subs:
            found = pattern.match(text, i)
            if found:
                out.append(_spelled(local, var, quoting))
                i = found.end()
                break
        else:
            c = text[i]
            out.append(c)
            if quoting == "'":
                quoting = "" if c == "'" else quoting
            elif c == "\\":
                out.append(text[i + 1:i + 2])
                i += 1
            elif quoting == '"':
                quoting = "" if c == '"' else quoting
            elif c in "'\"":
                quoting = c
            i += 1
    return "".join(out)


def exec_bash(real_bash: str, argv: list[str], environ: Mapping[str, str] | None = None) -> None:
    """Replace this process with the real bash running argv (argv[0] a script when rewritten)."""
    environ = os.environ if environ is None else environ
    if argv and not argv[0].startswith("-") and os.path.isfile(argv[0]):
        try:
            with open(argv[0], encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError):
            text = None
        if text is not None:
            changed = rewrite(text, environ)
            if changed != text:
                os.execv(real_bash, [real_bash, "-c", changed, *argv])
    os.execv(real_bash, [real_bash, *argv])


if __name__ == "__main__":
    exec_bash(sys.argv[1], sys.argv[2:])
