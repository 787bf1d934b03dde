"""A softmax policy over answers, one row of logits per question, trained with GRPO's loss.

logits(q) = prior(q) + W(q). The prior is a fixed, seeded "pretrained model" that is right about
a fifth of the time (it favours the right answer, near misses and the other operation's result);
it is also the frozen reference policy of the KL penalty. W starts at zero and is what GRPO learns.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import task

PRIOR_SEED = 7
PRIOR_NOISE = 0.5
PRIOR_BOOST = 3.5  # calibrated so the prior's accuracy is about 0.2
LEARNING_RATE = 1.0  # Adam on raw logits: a toy needs big steps to learn in 20 steps
ADAM_BETAS = (0.9, 0.999)
ADAM_EPS = 1e-8


def make_prior() -> np.ndarray:
    rng = np.random.default_rng(PRIOR_SEED)
    z = rng.normal(0.0, PRIOR_NOISE, (task.NUM_QUESTIONS, task.NUM_ANSWERS))
    rows = np.arange(task.NUM_QUESTIONS)
    # Harder questions (bigger results) get less of a boost.
    difficulty = np.where(task.Q_OP == 0, task.ANSWER / 18, task.ANSWER / 81)
    z[rows, task.ANSWER] += PRIOR_BOOST - 1.5 * difficulty
    for off in (-1, 1):
        z[rows, np.clip(task.ANSWER + off, 0, task.NUM_ANSWERS - 1)] += PRIOR_BOOST - 2.0
    other = np.where(task.Q_OP == 0, task.Q_A * task.Q_B, task.Q_A + task.Q_B)
    z[rows, other] += PRIOR_BOOST - 1.0
    return z


def softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def log_softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


@dataclass
class LossConfig:
    kl_penalty: float = 0.01
    clip_low: float = 0.2
    clip_high: float = 0.2


class Policy:
    def __init__(self) -> None:
        self.prior = make_prior()
        self.weights = np.zeros_like(self.prior)
        self.adam_m = np.zeros_like(self.prior)
        self.adam_v = np.zeros_like(self.prior)
        self.adam_t = 0

    # --- what a checkpoint holds -------------------------------------------------------
    def state(self) -> dict[str, np.ndarray]:
        return {"weights": self.weights}

    def optimizer_state(self) -> dict[str, np.ndarray]:
        return {"adam_m": self.adam_m, "adam_v": self.adam_v, "adam_t": np.array(self.adam_t)}

    def load(self, weights: dict[str, np.ndarray], optimizer: dict[str, np.ndarray]) -> None:
        self.weights = np.array(weights["weights"], dtype=np.float64)
        self.adam_m = np.array(optimizer["adam_m"], dtype=np.float64)
        self.adam_v = np.array(optimizer["adam_v"], dtype=np.float64)
        self.adam_t = int(optimizer["adam_t"])

    # --- generation and scoring --------------------------------------------------------
    def logits(self, questions: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
        w = self.weights if weights is None else weights
        return self.prior[questions] + w[questions]

    def sample(self, questions: np.ndarray, rng: np.random.Generator,
               weights: np.ndarray | None = None) -> np.ndarray:
        probs = softmax(self.logits(questions, weights))
        u = rng.random((len(questions), 1))
        return np.minimum((probs.cumsum(axis=1) < u).sum(axis=1), task.NUM_ANSWERS - 1)

    def logprobs(self, questions: np.ndarray, answers: np.ndarray) -> np.ndarray:
        return log_softmax(self.logits(questions))[np.arange(len(answers)), answers]

    def reference_logprobs(self, questions: np.ndarray, answers: np.ndarray) -> np.ndarray:
        return log_softmax(self.prior[questions])[np.arange(len(answers)), answers]

    # --- training ----------------------------------------------------------------------
    def train_minibatch(self, questions: np.ndarray, answers: np.ndarray, advantages: np.ndarray,
                        prev_logprobs: np.ndarray, ref_logprobs: np.ndarray, cfg: LossConfig) -> float:
        """One Adam step on the clipped policy-gradient loss plus the k3 KL to the reference."""
        n = len(answers)
        rows = np.arange(n)
        probs = softmax(self.logits(questions))
        logp = np.log(probs[rows, answers])
        ratio = np.exp(logp - prev_logprobs)
        clipped_ratio = np.clip(ratio, 1.0 - cfg.clip_low, 1.0 + cfg.clip_high)
        pg_unclipped, pg_clipped = -advantages * ratio, -advantages * clipped_ratio
        pg = np.maximum(pg_unclipped, pg_clipped)
        log_r = ref_logprobs - logp
        kl = np.exp(log_r) - log_r - 1.0
        loss = float(np.mean(pg + cfg.kl_penalty * kl))
        # d(loss_i)/d(logp_i); the clipped branch carries no gradient.
        dpg = np.where(pg_unclipped >= pg_clipped, -advantages * ratio, 0.0)
        dkl = cfg.kl_penalty * (1.0 - np.exp(log_r))
        coef = (dpg + dkl) / n
        onehot = np.zeros_like(probs)
        onehot[rows, answers] = 1.0
        grad_logits = coef[:, None] * (onehot - probs)
        grad = np.zeros_like(self.weights)
        np.add.at(grad, questions, grad_logits)
        self._adam(grad)
        return loss

    def _adam(self, grad: np.ndarray) -> None:
        b1, b2 = ADAM_BETAS
        self.adam_t += 1
        self.adam_m = b1 * self.adam_m + (1 - b1) * grad
        self.adam_v = b2 * self.adam_v + (1 - b2) * grad * grad
        m_hat = self.adam_m / (1 - b1 ** self.adam_t)
        v_hat = self.adam_v / (1 - b2 ** self.adam_t)
        self.weights -= LEARNING_RATE * m_hat / (np.sqrt(v_hat) + ADAM_EPS)


def group_advantages(rewards: np.ndarray, group_size: int, eps: float = 1e-6) -> np.ndarray:
    """(r - mean of its prompt's group) / (std of the group + eps)."""
    groups = rewards.reshape(-1, group_size)
    adv = (groups - groups.mean(axis=1, keepdims=True)) / (groups.std(axis=1, keepdims=True) + eps)
    return adv.reshape(-1)
