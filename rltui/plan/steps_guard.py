"""The budget guard's Google service account as a Step: `up` does not make it (`rltui submit
--down-after gpus` or `--max-cost USD` does, through this same `ensure_account`: plan/guard.py),
so up skips it; probing the plan shows whether it exists; `down` removes it and the project
binding rltui gave it. Its link to the supervisor's Kubernetes ServiceAccount is the run's
(submit makes it, with the cluster's workload pool); it goes with the account.

Ownership as everywhere (plan/ownership.py): the account is rltui's when its description starts
with RULE_MARK (an IAM ServiceAccount has no labels; `description` is one of the two fields a
create may set, iam v1 projects.serviceAccounts.create). One without the mark is Kept with the
command that deletes it by hand. Of the project's policy only the member rltui added goes (the
role's other members stay); the account's own policy (who may act as it) goes with it.

What the guard did not finish (a GPU pool it could not delete: its state says "failed") goes
with the cluster on the cluster's row (xpk cluster delete removes every pool); this row comes
after the supervisors are removed (`stop_jobs`), so no guard acts while its identity goes.
"""

from __future__ import annotations

from shlex import join

from .. import manifests_supervisor as ms
from .context import Context
from .ownership import not_rltuis
from .step import Kept, Probe, StepOutput
from .steps_base import ContextStep


class GuardAccountStep(ContextStep):
    name, title = "guard_account", "Budget guard's service account"
    needs = ("enable_apis",)
    made_by_up = False
    up_words = "made by `rltui submit --down-after gpus` or `--max-cost`, not by up"
    expected_key = "k8s_apply"  # one IAM call or two: as quick as a Kubernetes apply

    def _email(self) -> str:
        return self.ctx.iam.email(ms.guard_account_id(self.cfg))

    def command(self) -> str:
        """What `submit --down-after/--max-cost` makes first (plan/guard.py ensure_account)."""
        from .guard import GUARD_ROLE, description

        c, email = self.cfg, self._email()
        return " && ".join([
            join(["gcloud", "iam", "service-accounts", "create", ms.guard_account_id(c), f"--project={c.project_id}",
                  "--display-name=rltui budget guard", f"--description={description(c)}"]),
            join(["gcloud", "projects", "add-iam-policy-binding", c.project_id, f"--member=serviceAccount:{email}",
                  f"--role={GUARD_ROLE}", "--condition=None"])])

    def down_title(self) -> str:
        return f"Service account {ms.guard_account_id(self.cfg)} (the budget guard's)"

    def down_command(self) -> str:
        from .guard import GUARD_ROLE

        email, p = self._email(), f"--project={self.cfg.project_id}"
        # Made only by `submit --down-after/--max-cost`: absent is fine.
        return "; ".join([
            join(["gcloud", "projects", "remove-iam-policy-binding", self.cfg.project_id,
                  f"--member=serviceAccount:{email}", f"--role={GUARD_ROLE}", "--condition=None", "--quiet"])
            + " 2>/dev/null",
            join(["gcloud", "iam", "service-accounts", "delete", email, p, "--quiet"]) + " 2>/dev/null || true"])

    async def probe(self, ctx: Context) -> Probe:
        from .guard import guard_account, is_rltuis

        email, account = await guard_account(ctx)
        if account is None:
            return Probe(exists=False, detail="none: " + self.up_words)
        if not is_rltuis(account):
            return Probe(exists=True, ready=False, detail=f"{email} exists and is not rltui's")
        return Probe(exists=True, detail=email)

    async def apply(self, ctx: Context, out: StepOutput) -> None:
        """What submit does first (up skips this step: made_by_up is False)."""
        from .guard import GUARD_ROLE, ensure_account

        email = await ensure_account(ctx)
        out.note(f"{email}, {GUARD_ROLE} on project {self.cfg.project_id}")

    async def destroy(self, ctx: Context, out: StepOutput) -> str | None:
        from .guard import guard_account, hand_delete_account, is_rltuis, remove_guard_account

        email, account = await guard_account(ctx)
        if account is not None and not is_rltuis(account):
            raise Kept(not_rltuis("its description lacks rltui's mark", hand_delete_account(self.cfg, email)))
        await remove_guard_account(ctx, out.line)
        return f"deleted {email}, and its role on the project"
