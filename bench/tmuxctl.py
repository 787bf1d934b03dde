"""A tmux control-mode client (`tmux -C`, tmux(1) CONTROL MODE): commands and their output over
one pipe, so that sending a key or reading the screen costs the tmux server's work only.

Why not `tmux send-keys` and `tmux capture-pane` processes: each one is a fork and exec of a
tmux client, 5.8 ms here (one `capture-pane -p`, median of 50), against 0.38 ms through this
client. A bench that polls the screen every few milliseconds that way measures in steps of
about 10 ms, adds the key's own process start to every figure, and keeps most of a core busy
beside the app it measures on a 2-core machine.

The client attaches with the `ignore-size` and `no-output` flags (attach-session -f, tmux
3.2+): it does not resize the window, and the pane's output is not copied to it (%output
notifications). Each command's answer is the lines between its %begin and %end (or %error).
"""

from __future__ import annotations

import os
import subprocess


class TmuxControl:
    """One control client of the server on `socket` (tmux -L), attached to session `target`."""

    def __init__(self, socket: str, target: str) -> None:
        self.target = target
        self._proc = subprocess.Popen(
            ["tmux", "-L", socket, "-C", "attach-session", "-f", "ignore-size,no-output", "-t", target],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
        self._buf = b""
        self.command("display-message -p ready", until="ready")  # past the attach's own block

    def _line(self) -> bytes:
        assert self._proc.stdout is not None
        while b"\n" not in self._buf:
            chunk = os.read(self._proc.stdout.fileno(), 1 << 16)
            if not chunk:
                raise EOFError("the tmux control client ended")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return line

    def command(self, command: str, until: str | None = None) -> list[str]:
        """Run one tmux command; its output lines (with `until`, the first answer holding it)."""
        assert self._proc.stdin is not None
        self._proc.stdin.write(command.encode() + b"\n")
        out: list[bytes] = []
        inside = False
        while True:
            line = self._line()
            if line.startswith(b"%begin"):
                inside, out = True, []
            elif inside and line.startswith((b"%end", b"%error")):
                inside = False
                got = [raw.decode("utf-8", "replace") for raw in out]
                if line.startswith(b"%error"):
                    raise RuntimeError(f"tmux {command}: {' '.join(got)}")
                if until is None or until in got:
                    return got
            elif inside:
                out.append(line)

    def send(self, *keys: str, literal: bool = False) -> None:
        quoted = " ".join("'" + k.replace("'", "'\\''") + "'" for k in keys)
        self.command(f"send-keys -t {self.target} {'-l ' if literal else ''}{quoted}")

    def screen(self) -> str:
        return "\n".join(self.command(f"capture-pane -p -t {self.target}"))

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()   # our own child, by its handle
            self._proc.wait()
