"""How the fake xpk runs the REAL gcloud and kubectl: xpk 1.16.0's core/commands.py and
utils/console.py, with argv lists instead of its shell strings.

- run_for_value (run_command_for_value): "Task: `<task>` is implemented by `<command>`", the
  output captured (stderr merged unless hide_error, which leaves stderr on the terminal); on a
  failure "Task <task> failed with <code>" and the output between two rows of 80 asterisks.
- run_with_updates (run_command_with_updates): verbose streams the child's output live and ends
  with "Task: `<task>` terminated with code `<code>`"; quiet captures it, "Task: `<task>`
  succeeded." or "... terminated with ERROR `<code>`, printing logs" and the output.
- run_with_updates_retry: up to 5 tries, "Try <i>: <task>", "Wait 10 seconds before retrying."
  (the sandbox waits 10 s of its own time: 10/speed real seconds).
- A command xpk chains with `&&` is a list of argvs run in turn until one fails.
- Dry runs print "Task: `<task>` is implemented by the following command not running since it
  is a dry run. \\n<command>" and run nothing.
Commands are shown as `shlex.join` of their argv.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import time
from typing import Any, Sequence

Chain = Sequence[Sequence[str]]


def say(*parts: Any, end: str = "\n") -> None:
    """xpk's utils/console.py xpk_print."""
    sys.stdout.write("[XPK] ")
    print(*parts, end=end)
    sys.stdout.flush()


def relay(text: str, end: str = "\n") -> None:
    """A child's own output (gcluster's Terraform lines, gcloud's), printed as it streams."""
    sys.stdout.write(text + end)
    sys.stdout.flush()


class XpkExit(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def xpk_exit(code: int) -> None:
    raise XpkExit(code)


def shown(chain: Chain) -> str:
    return " && ".join(shlex.join(argv) for argv in chain)


def _dry(task: str, chain: Chain) -> None:
    say(f"Task: `{task}` is implemented by the following command not running since it is a dry run. "
        f"\n{shown(chain)}")


def _capture(chain: Chain, merge: bool) -> tuple[int, str]:
    out = []
    for argv in chain:
        try:
            res = subprocess.run(list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT if merge else None,
                                 text=True, stdin=subprocess.DEVNULL)
        except FileNotFoundError:
            out.append(f"/bin/sh: 1: {argv[0]}: not found\n")
            return 127, "".join(out)
        out.append(res.stdout)
        if res.returncode != 0:
            return res.returncode, "".join(out)
    return 0, "".join(out)


def _logs(output: str) -> None:
    say("*" * 80)
    say(output)
    say("*" * 80)


def run_for_value(chain: Chain, task: str, *, dry_run: bool = False, dry_value: str = "0",
                  hide_error: bool = False) -> tuple[int, str]:
    if dry_run:
        _dry(task, chain)
        return 0, dry_value
    say(f"Task: `{task}` is implemented by `{shown(chain)}`")
    code, output = _capture(chain, merge=not hide_error)
    if code != 0:
        say(f"Task {task} failed with {code}")
        _logs(output)
    return code, output


def run_with_updates(chain: Chain, task: str, *, verbose: bool = True, dry_run: bool = False) -> int:
    if dry_run:
        _dry(task, chain)
        return 0
    if not verbose:
        say(f"Task: `{task}` is implemented by `{shown(chain)}`")
        code, output = _capture(chain, merge=True)
        if code != 0:
            say(f"Task: `{task}` terminated with ERROR `{code}`, printing logs")
            _logs(output)
            return code
        say(f"Task: `{task}` succeeded.")
        return 0
    say(f"Task: `{task}` is implemented by `{shown(chain)}`, streaming output live.")
    code = 0
    for argv in chain:
        sys.stdout.flush()
        try:
            code = subprocess.run(list(argv), stdin=subprocess.DEVNULL).returncode
        except FileNotFoundError:
            code = 127
        if code != 0:
            break
    say(f"Task: `{task}` terminated with code `{code}`")
    return code


def run_with_updates_retry(chain: Chain, task: str, *, wait_s: float, shown_wait_s: int = 10,
                           attempts: int = 5, verbose: bool = True, dry_run: bool = False) -> int:
    code = -1
    for i in range(1, attempts + 1):
        if i > 1:
            say(f"Wait {shown_wait_s} seconds before retrying.")
            time.sleep(wait_s)
        say(f"Try {i}: {task}")
        code = run_with_updates(chain, task, verbose=verbose, dry_run=dry_run)
        if code == 0:
            break
    return code
