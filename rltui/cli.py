"""`rltui`: the wizard's entry point and its headless commands.

Startup imports only the standard library; each command imports what it needs when it runs
(rich for tables, the sandbox, the cloud clients), so `rltui --version` and `rltui check` stay
instant and never load textual, grpc, google, kubernetes or ray.
"""

from __future__ import annotations

import argparse
import atexit
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from . import __version__
from .sandbox_link import LUSTRE_QUOTA, cmd_sandbox

if TYPE_CHECKING:  # types only: the commands import what they need when they run
    from .cloud.endpoints import Endpoints
    from .config import RLConfig
    from .envfile import EnvFile
    from .seam import WizardSession

EXIT_USAGE = 2


class UsageError(Exception):
    """Bad input: printed as one line, exit code 2."""


class Parser(argparse.ArgumentParser):
    """argparse that reports a bad flag in one line instead of usage + traceback-ish noise."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see `{self.prog} --help`)")


# --- helpers ------------------------------------------------------------------------------------

def usd(text: str) -> float:
    """--max-cost's value: a positive amount of US dollars ("500", "412.50"); else argparse's
    one-line error naming the flag (exit 2)."""
    import math

    try:
        amount = float(text.strip().removeprefix("$").replace(",", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an amount in USD (e.g. --max-cost 500)") from None
    if not math.isfinite(amount) or amount <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: the budget must be more than 0 USD (e.g. --max-cost 500)")
    return amount


def _load_env(path: str) -> tuple[EnvFile, RLConfig]:
    """Read and validate env.sh; raise UsageError with one line per problem."""
    from .config import ConfigError, parse_config
    from .envfile import EnvFile, EnvFileError

    try:
        env = EnvFile.read(path)
    except EnvFileError as exc:
        where = f"{exc.source}" + (f" line {exc.lineno}" if exc.lineno else "")
        raise UsageError(f"{exc.name}: {where}: {exc.message}" if exc.name
                         else f"{where}: {exc.message}") from None
    try:
        return env, parse_config(env.values())
    except ConfigError as exc:
        raise UsageError("\n".join(str(p) for p in exc.problems)) from None


def _warn_mode(path: str, cfg: RLConfig) -> None:
    from .envfile import mode_problem

    warning = mode_problem(path) if (cfg.hf_token or cfg.wandb_api_key or cfg.notify_webhook) else None
    if warning:
        print(f"warning: {warning}", file=sys.stderr)


# --- commands -----------------------------------------------------------------------------------

def cmd_check(args: argparse.Namespace) -> int:
    from .config import unknown_variables

    env, cfg = _load_env(args.env)
    _warn_mode(args.env, cfg)
    if others := unknown_variables(env.values())[1]:   # misspellings failed in _load_env
        print(f"warning: {args.env}: {', '.join(others)}: rltui reads no such variable from env.sh"
              " (kept as written)", file=sys.stderr)
    token = "set" if cfg.hf_token else "not set (needed only to submit)"
    print(f"{args.env}: OK: project {cfg.project_id}, cluster {cfg.cluster_name} in {cfg.zone}"
          f" ({cfg.num_nodes} x {cfg.device_type}), Lustre {cfg.lustre_instance_id}"
          f" {cfg.lustre_capacity} GiB on {cfg.network}; HF_TOKEN {token}")
    return 0


def cmd_notify(args: argparse.Namespace) -> int:
    """`rltui notify --test`: one message to NOTIFY_WEBHOOK, posted from this machine now."""
    from .notify import NotifyFailed, test_message

    _, cfg = _load_env(args.env)
    if cfg.notify_webhook is None:
        raise UsageError(f"NOTIFY_WEBHOOK: not set in {args.env}: set it to a Slack or Google Chat incoming"
                         " webhook's URL (https://...)")
    try:
        test_message(cfg)
    except NotifyFailed as exc:
        print(f"notify: {exc}", file=sys.stderr)
        return 1
    print("notify: posted a test message to NOTIFY_WEBHOOK")
    return 0


def cmd_script(args: argparse.Namespace) -> int:
    from .script import equivalent_script

    _, cfg = _load_env(args.env)
    sys.stdout.write(equivalent_script(cfg))
    return 0


def cmd_manifests(args: argparse.Namespace) -> int:
    import ipaddress

    from .envfile import write_private
    from .manifests import RUN_SCRIPT_FILE, codelab_files

    if args.lustre_ip is not None:
        try:
            ipaddress.IPv4Address(args.lustre_ip)
        except ValueError:
            raise UsageError(f"--lustre-ip: {args.lustre_ip!r} is not an IPv4 address"
                             " (the part of the mount point before '@')") from None
    _, cfg = _load_env(args.env)
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out: {out} exists and is not a folder")
    out.mkdir(parents=True, exist_ok=True)
    for name, text in codelab_files(cfg, args.lustre_ip).items():
        path = write_private(out / name, text)
        if name == RUN_SCRIPT_FILE:
            path.chmod(0o700)
        print(path)
    if args.lustre_ip is None:
        print("note: the PV's ip is a placeholder; pass --lustre-ip once Lustre is ACTIVE",
              file=sys.stderr)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from .report import ReportError, command

    try:
        return command(Path(args.log), as_json=args.json)
    except ReportError as exc:
        raise UsageError(str(exc)) from None


def cmd_runs(args: argparse.Namespace) -> int:
    """Every job's summary under the state folder (rltui/runs.py): no env.sh, no cloud."""
    from . import runs

    found = runs.all_runs()
    if args.action == "compare":
        for wanted in (w for w in (args.a, args.b) if not any(r.id.startswith(w) for r in found)):
            raise UsageError(f"rltui runs compare: {wanted!r}: no such run; the runs: "
                             + (", ".join(r.id for r in found) or "none yet"))
        try:
            a, b = runs.resolve(found, args.a), runs.resolve(found, args.b)
        except runs.UnknownRun as exc:
            raise UsageError(f"rltui runs compare: {exc}") from None
        print("\n".join(runs.compare_lines(a, b)))
        return 0
    if args.json:
        import json

        print(json.dumps([r.row() for r in found], indent=2))
        return 0
    print("\n".join(runs.list_lines(found)))
    return 0


def _until_signal(make: Callable[[], Any]) -> int:
    """Run the coroutine `make()` on a new event loop; SIGINT (ctrl+c), SIGTERM and SIGHUP (a
    closed terminal) cancel it, so it ends its own way (a detached xpk is left running and the
    command says so), and the exit code is 128 + the signal's number, without a traceback."""
    import asyncio
    import signal

    caught: list[int] = []

    async def main() -> int:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None

        def on_signal(sig: int) -> None:
            caught.append(sig)
            task.cancel()

        signals = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
        for sig in signals:
            loop.add_signal_handler(sig, on_signal, sig)
        try:
            code: int = await make()
            return code
        except BaseException:
            if caught:  # cancelled by a signal (or its output failed on a closed terminal)
                return 128 + caught[0]
            raise
        finally:
            for sig in signals:
                loop.remove_signal_handler(sig)

    return asyncio.run(main())


def _headless(args: argparse.Namespace, run: Callable[..., Any]) -> int:
    """Load env.sh, pick the endpoints, run one headless command to its exit code."""
    from .cloud.errors import CloudError
    from .plan.jobs import Refused
    from .sandbox_link import SandboxProblem, endpoints_for

    _, cfg = _load_env(args.env)
    try:
        endpoints = endpoints_for(getattr(args, "sandbox", False))
        endpoints.require_credentials()
        return _until_signal(lambda: run(cfg, endpoints))
    except Refused as exc:
        raise UsageError(str(exc)) from None
    except CloudError as exc:
        if exc.code == "NoCredentials":  # nothing was asked of the cloud: fix and rerun
            raise UsageError(exc.message) from None
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except SandboxProblem as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def cmd_up(args: argparse.Namespace) -> int:
    from . import headless

    if args.check:
        return _headless(args, lambda cfg, ep: headless.check(cfg, ep, args.env))
    return _headless(args, lambda cfg, ep: headless.up(cfg, ep, yes=args.yes, verbose=args.verbose))


def cmd_submit(args: argparse.Namespace) -> int:
    from . import headless

    return _headless(args, lambda cfg, ep: headless.submit(cfg, ep, resume=args.resume,
                                                           recover=not args.no_recover,
                                                           follow=args.follow,
                                                           new_folder=args.new_folder,
                                                           down_after=args.down_after,
                                                           max_cost_usd=args.max_cost))


def cmd_logs(args: argparse.Namespace) -> int:
    from . import headless

    return _headless(args, lambda cfg, ep: headless.logs(cfg, ep, job=args.job, follow=args.follow))


def cmd_status(args: argparse.Namespace) -> int:
    from .cloud.computereads import forked

    # First thing: a child imports Compute's clients while env.sh is read, then makes the
    # Compute reads while this process asks the rest (cloud/computereads.py).
    with forked() as compute:
        def run(cfg: Any, endpoints: Any) -> Any:
            from . import headless

            compute.ask(cfg, endpoints)
            return headless.status(cfg, endpoints, as_json=args.json, compute=compute)

        return _headless(args, run)


def _gs_folder(uri: str | None, flag: str) -> None:
    """A bad gs:// folder is a usage error before any cloud call (plan/export.py's rule)."""
    from .plan.export import destination
    from .plan.jobs import Refused

    try:
        uri is None or destination(uri, flag)
    except Refused as exc:
        raise UsageError(str(exc)) from None


def cmd_down(args: argparse.Namespace) -> int:
    from . import headless

    _gs_folder(args.export_to, "--export-to")
    return _headless(args, lambda cfg, ep: headless.down(cfg, ep, yes=args.yes, verbose=args.verbose,
                                                         export_to=args.export_to, no_export=args.no_export))


def cmd_export(args: argparse.Namespace) -> int:
    from . import headless

    _gs_folder(args.to, "--to")
    return _headless(args, lambda cfg, ep: headless.export(cfg, ep, to=args.to, whole=args.all))


class _DeferredSession:
    """The wizard's Session, built on its first use instead of before the first frame: loading
    session.py (pydantic, the plan) and parsing env.sh take about as long as Textual's first
    paint, and the app reads the config in its boot worker (app.py's _boot). Attribute reads go
    to the Session; the lock makes one when the worker and the UI thread ask at the same time.
    To mypy it is a WizardSession through `__getattr__` (each name is the made session's)."""

    def __init__(self, make: Callable[[], WizardSession]) -> None:
        import threading

        self._make = make
        self._lock = threading.Lock()
        self._session: WizardSession | None = None

    def __getattr__(self, name: str) -> Any:   # only for names the proxy itself lacks
        with self._lock:
            if self._session is None:
                self._session = self._make()
        return getattr(self._session, name)


def cmd_wizard(args: argparse.Namespace) -> int:
    """The full-screen wizard. The session and the cloud clients load in workers, after the
    first frame. With --serve, the same wizard in a browser (rltui/serve.py)."""
    env_path = Path(args.env)
    if env_path.exists() and not env_path.is_file():
        raise UsageError(f"--env: {env_path} is not a file")
    if args.serve:
        from . import serve

        try:
            return serve.serve(serve.WizardArgs(str(env_path), args.sandbox),
                               port=args.port if args.port is not None else serve.DEFAULT_PORT,
                               url=args.public_url)
        except serve.ServeError as exc:
            raise UsageError(str(exc)) from None
    for flag, value in (("--port", args.port), ("--public-url", args.public_url)):
        if value is not None:
            raise UsageError(f"{flag}: only with --serve")
    if args.sandbox:
        from .sandbox_link import SandboxProblem, contract

        try:
            sandbox = contract()
        except SandboxProblem as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        # The wizard would start one: say now if it cannot.
        problem = sandbox.ray_env_problem() if sandbox.read_status() is None else None
        if problem:
            print(f"error: {problem}", file=sys.stderr)
            return 1
    from .app import RLTuiApp
    from .widgets.chrome import HeaderInfo

    def endpoints() -> Endpoints:
        from .sandbox_link import endpoints_for

        return endpoints_for(args.sandbox)

    def session() -> WizardSession:
        from .remote import RemoteSession  # the cloud clients load in its worker process

        return RemoteSession(env_path, endpoints)

    header = HeaderInfo(mode="SANDBOX" if args.sandbox else "Google Cloud")
    RLTuiApp(_DeferredSession(session), header=header).run()
    return 0


# --- parser -------------------------------------------------------------------------------------

Command = Callable[[argparse.Namespace], int]


# The wizard's own options that take a value (their value is not a command).
_WIZARD_VALUED = ("--env", "--port", "--public-url")


def _wizard_only(argv: Sequence[str]) -> bool:
    """True when argv can only mean the wizard (options, no command, no help): its first frame
    is then not held up building a dozen subparsers. In doubt, False (the full parser decides)."""
    tokens = iter(argv)
    for token in tokens:
        if token in ("-h", "--help") or not token.startswith("-"):
            return False
        if token in _WIZARD_VALUED:
            next(tokens, None)
    return True


CLOUD_COMMANDS = ("up", "submit", "logs", "status", "export", "down")
ENV_COMMANDS = ("check", "script", "manifests", "notify", *CLOUD_COMMANDS)


def misapplied(args: argparse.Namespace) -> str | None:
    """The line for a flag given to a command it does not apply to (exit 2, as gcloud refuses an
    argument its command does not take), else None: never ignored, so never a surprise."""
    command, wizard = args.command, "it is the wizard's (rltui --serve [--port N] [--public-url URL])"
    given = [("--serve", args.serve, wizard), ("--port", args.port is not None, wizard),
             ("--public-url", args.public_url is not None, wizard),
             ("--sandbox", args.sandbox and command not in CLOUD_COMMANDS, "it asks no cloud"),
             ("--env", args.env is not None and command not in ENV_COMMANDS, "it reads no env.sh")]
    if command == "up" and args.check:
        command, why = "up --check", "it creates nothing, so asks nothing and runs no xpk"
        given += [("--yes", args.yes, why), ("--verbose", args.verbose, why)]
    elif command == "submit" and args.no_recover:
        command, why = "submit --no-recover", "the budget guard runs in the job's supervisor, which it leaves out"
        given += [("--down-after", args.down_after is not None, why), ("--max-cost", args.max_cost is not None, why)]
    elif command == "runs" and args.action == "compare":
        command = "runs compare"
        given.append(("--json", args.json, "it prints a table; `rltui runs --json` lists the runs"))
    return next((f"rltui {command}: {flag} does not apply to {command}: {why}"
                 for flag, on, why in given if on and command), None)


def build_parser(wizard_only: bool = False) -> Parser:
    parser = Parser(prog="rltui", description="The codelab 'Scale RL with GKE and Managed Lustre'"
                    " as a wizard and as commands.", epilog="A flag given to a command it does not"
                    " apply to is a usage error (exit 2), as in gcloud.")
    parser.add_argument("--version", action="version", version=f"rltui {__version__}")
    parser.add_argument("--env", help=f"the codelab's env.sh (default: ./env.sh); wizard, {', '.join(ENV_COMMANDS)}")
    parser.add_argument("--sandbox", action="store_true",
                        help=f"use the local emulated project; wizard, {', '.join(CLOUD_COMMANDS)}")
    parser.add_argument("--serve", action="store_true",
                        help="the wizard only: serve it to a browser on 127.0.0.1 (Cloud Shell's Web Preview)")
    parser.add_argument("--port", type=int, help="the wizard only, with --serve: the port (default 8080)")
    parser.add_argument("--public-url", metavar="URL", help="the wizard only, with --serve: the address the browser"
                        " uses (default: Web Preview's, https://PORT-$WEB_HOST, where WEB_HOST is set)")
    parser.set_defaults(func=cmd_wizard)
    if wizard_only:
        parser.set_defaults(command=None)   # as the subparsers' dest would be
        return parser
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)

    def add(name: str, func: Command, help: str, env: bool = True) -> Parser:
        p = sub.add_parser(name, help=help, description=help)
        if env:
            # SUPPRESS: `rltui --env F check` keeps F (a subparser default would override it).
            p.add_argument("--env", default=argparse.SUPPRESS, help="the codelab's env.sh (default: ./env.sh)")
        p.set_defaults(func=func)
        return p

    add("check", cmd_check, "validate env.sh; exit 2 with one line per problem")
    p = add("notify", cmd_notify, "post to NOTIFY_WEBHOOK (a Slack or Google Chat incoming webhook)")
    p.add_argument("--test", action="store_true", required=True, help="send one test message now")
    add("script", cmd_script, "print the whole flow as an equivalent bash script")
    p = add("manifests", cmd_manifests, "write the files the codelab writes by hand")
    p.add_argument("--out", required=True, help="folder to write them into")
    p.add_argument("--lustre-ip", help="the Lustre instance's IP (else a marked placeholder)")
    p = add("report", cmd_report, "summarise a NeMo-RL GRPO log, a row per step", env=False)
    p.add_argument("log", help="the saved job log")
    p.add_argument("--json", action="store_true", help="one JSON object per step and line")
    def cloud(name: str, func: Command, help: str) -> Parser:
        p = add(name, func, help)
        p.add_argument("--sandbox", action="store_true", default=argparse.SUPPRESS,
                       help="use the local sandbox (started if needed)")
        return p

    p = cloud("up", cmd_up, "create everything up to a ready RayCluster (asks first)")
    p.add_argument("--yes", action="store_true", help="do not ask (not with --check)")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="also print xpk's and gcloud's output (not with --check)")
    p.add_argument("--check", action="store_true", help="create nothing: check quotas, permissions, names and the"
                   " zone; exit 1 if the plan cannot run (--yes and --verbose do not apply to it)")
    p = cloud("submit", cmd_submit, "submit the GRPO job; prints its id last")
    folder = p.add_mutually_exclusive_group()
    folder.add_argument("--resume", action="store_true", help="continue from the newest step_N checkpoint in the"
                        " checkpoint folder on the Lustre volume")
    folder.add_argument("--new-folder", action="store_true", help="when the checkpoint folder already holds"
                        " checkpoints: start a new run in a fresh CHECKPOINT_DIR-N folder")
    p.add_argument("--no-recover", action="store_true",
                   help="no supervisor on the cluster: a preemption ends the job (as `ray job submit`)")
    p.add_argument("--follow", action="store_true",
                   help="then its log until it ends, as `logs --follow` (final status last)")
    p.add_argument("--down-after", choices=("gpus",), help="the supervisor deletes the GPU node pools once"
                   " the run ends (Lustre and the checkpoints are kept)")
    p.add_argument("--max-cost", type=usd, metavar="USD", help="the supervisor stops the job and deletes the"
                   " GPU node pools once the GPU nodes have cost about this much (an estimate from the"
                   " Cloud Billing Catalog)")
    p = cloud("logs", cmd_logs, "the job's log lines (exactly once each)")
    p.add_argument("--job", help="submission id (default: the last one submitted)")
    p.add_argument("--follow", action="store_true", help="until the job ends; final status last")
    p = cloud("status", cmd_status, "every resource of the plan as the cloud sees it, and leaks")
    p.add_argument("--json", action="store_true")
    p = cloud("export", cmd_export, "copy the run's checkpoint folder to Cloud Storage (Lustre's ExportData)")
    p.add_argument("--to", required=True, metavar="gs://BUCKET/PREFIX", help="where its step_N/ folders land")
    p.add_argument("--all", action="store_true", help="the whole Lustre file system, not only the run's folder")
    p = cloud("down", cmd_down, "stop the job, delete what rltui created, scan for leaks")
    p.add_argument("--yes", action="store_true", help="do not ask")
    p.add_argument("-v", "--verbose", action="store_true", help="also print xpk's and gcloud's output")
    keep = p.add_mutually_exclusive_group()
    keep.add_argument("--export-to", metavar="gs://BUCKET/PREFIX", help="first export the run's checkpoint"
                      " folder there and wait for it (Lustre is deleted only after it is copied)")
    keep.add_argument("--no-export", action="store_true", help="do not offer to export the checkpoints")
    p = add("runs", cmd_runs, "every job's summary kept under the state folder; compare two", env=False)
    p.add_argument("--json", action="store_true", help='a JSON array of {"id", "started", "status", "steps",'
                   ' "final_reward", "attempts"} (not with compare)')
    p.set_defaults(action="list")
    actions = p.add_subparsers(dest="action", metavar="ACTION", parser_class=Parser)
    a = actions.add_parser("compare", help="reward and step time per step, A beside B")
    a.add_argument("a", metavar="A", help="a run id (a unique prefix will do)")
    a.add_argument("b", metavar="B", help="another run id (a unique prefix will do)")
    p = add("sandbox", cmd_sandbox, "the local emulated project: start, status, stop, env, preempt, stall",
            env=False)
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True, parser_class=Parser)
    a = actions.add_parser("start", help="start it in the background (returns once it answers)")
    a.add_argument("--speed", type=float, default=60.0, help="simulated minutes per real second (default 60)")
    a.add_argument("--faults", type=float, default=0.0, help="probability that a call fails transiently (default 0)")
    a.add_argument("--seed", type=int, default=0, help="makes faults and jitter reproducible")
    a.add_argument("--profile", help="a latency profile JSON file (default: the reference one)")
    a.add_argument("--quota", action="append", metavar="METRIC=LIMIT", help="a regional quota, e.g."
                   " PREEMPTIBLE_NVIDIA_B200_GPUS=16: node pools above it fail as GKE's do, and regions.get reports"
                   f" it (repeatable); {LUSTRE_QUOTA}=GIB for Lustre capacity per zone and network")
    a.add_argument("--deny", action="append", metavar="PERMISSION", help="a permission the caller lacks"
                   " (testIamPermissions leaves it out), e.g. lustre.instances.create (repeatable)")
    a.add_argument("--kuberay-version", metavar="V", help="the KubeRay release the RayOperator add-on runs, 1.1.0"
                   " to 1.7.0 (default 1.7.0): status conditions, probes and readiness follow it")
    a.add_argument("--capacity", action="append", metavar="KIND=unavailable", help="GPU capacity the zones are"
                   " out of: spot or on-demand; a GPU node pool asking for it fails as a GKE stockout (repeatable)")
    a = actions.add_parser("status", help="its endpoints (exit 1 when none runs)")
    a.add_argument("--json", action="store_true")
    actions.add_parser("stop", help="end it and everything it started, by PID")
    actions.add_parser("env", help="export lines pointing the real gcloud and kubectl at it, with"
                                   ' xpk and ray first on PATH: eval "$(rltui sandbox env)"')
    a = actions.add_parser("preempt", help="take a GPU node away, as Spot preemption does")
    which = a.add_mutually_exclusive_group()
    which.add_argument("--node", help="the node's name (default: a worker's node)")
    which.add_argument("--head", action="store_true", help="the node running the Ray head pod")
    a.add_argument("--hard", action="store_true",
                   help="no graceful shutdown: Ray loses the node at once, Kubernetes only after the"
                        " node-monitor grace period (default: GKE's 30 s graceful shutdown)")
    a = actions.add_parser("stall", help="freeze the running job's driver process (SIGSTOP), as a hung job"
                           " looks: Ray still says RUNNING, no pod changes")
    a.add_argument("--job", help="its submission id (default: the one job Ray runs)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser(wizard_only=_wizard_only(sys.argv[1:] if argv is None else argv))
    try:
        args = parser.parse_args(argv)
        if wrong := misapplied(args):
            raise UsageError(wrong)
        args.env = "env.sh" if args.env is None else args.env
        func: Command = args.func
        return func(args)
    except UsageError as exc:
        for line in str(exc).splitlines():
            print(line, file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `rltui report log | head`: not an error.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def run() -> None:
    """The `rltui` command: main(), then out without the interpreter's teardown (freeing the
    Kubernetes, Google and Ray clients' modules one by one took over a second after every
    command: docs/decisions/import-cost.md). What
    must happen at exit still does: threads end (else the usual exit joins them), the atexit
    handlers run (as multiprocessing's forked children do before os._exit), output is flushed."""
    try:
        code = main()
    except SystemExit as exc:  # argparse: --help, and its own usage errors
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)
    import threading

    if any(t.is_alive() and not t.daemon for t in threading.enumerate()
           if t is not threading.main_thread()):
        sys.exit(code)
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:  # `rltui report log | head`
        pass
    os._exit(code)


if __name__ == "__main__":
    run()
