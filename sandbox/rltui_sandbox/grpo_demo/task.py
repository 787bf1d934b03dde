"""The toy math task: single-digit addition and multiplication, answered as `\\boxed{n}`.

A "question" is (a, b, op) with a, b in 0..9; the 200 of them are the whole space. A dataset
is a fixed, seeded list of question ids sized like the real one, so the dataloader lines and
step counts look like the codelab's.
"""

from __future__ import annotations

import re
import zlib

import numpy as np

DIGITS = 10
OPS = ("+", "*")
NUM_QUESTIONS = DIGITS * DIGITS * len(OPS)
NUM_ANSWERS = 82  # 0..81 covers every sum and product of two digits

# Training-set sizes of the datasets a user may name (DeepScaleR-Preview has 40,315 problems).
DATASET_SIZES = {"DeepScaler": 40315, "OpenMathInstruct-2": 1000000}
DEFAULT_DATASET_SIZE = 50000

PROMPT = ("Think step-by-step to solve the following problem. "
          "Output your answer inside of \\boxed{{}} tags.\nWhat is {a} {op} {b}?")
RESPONSE = "{a} {op} {b} = {k}. The answer is \\boxed{{{k}}}."
_BOXED = re.compile(r"\\boxed\{(-?\d+)\}")
_TOKEN = re.compile(r"\d|[A-Za-z]+|[^\sA-Za-z\d]")

_ids = np.arange(NUM_QUESTIONS)
Q_OP = _ids // (DIGITS * DIGITS)
Q_A = (_ids // DIGITS) % DIGITS
Q_B = _ids % DIGITS
ANSWER = np.where(Q_OP == 0, Q_A + Q_B, Q_A * Q_B)


def count_tokens(text: str) -> int:
    """A crude tokenizer: one token per digit, word or symbol."""
    return len(_TOKEN.findall(text))


def prompt_text(q: int) -> str:
    return PROMPT.format(a=Q_A[q], op=OPS[Q_OP[q]], b=Q_B[q])


def response_text(q: int, k: int) -> str:
    return RESPONSE.format(a=Q_A[q], op=OPS[Q_OP[q]], b=Q_B[q], k=k)


def math_reward(q: int, response: str) -> float:
    """1.0 when the last boxed number is the right answer, else 0.0 (like NeMo-RL's math env)."""
    found = _BOXED.findall(response)
    return 1.0 if found and int(found[-1]) == ANSWER[q] else 0.0


def _name_seed(name: str, split: str) -> int:
    return zlib.crc32(f"{name}/{split}".encode())


def load_dataset(name: str) -> np.ndarray:
    """Question ids of the training split of `name` (deterministic per name)."""
    size = DATASET_SIZES.get(name, DEFAULT_DATASET_SIZE)
    return np.random.default_rng(_name_seed(name, "train")).integers(0, NUM_QUESTIONS, size)


def load_val_dataset(name: str, max_samples: int) -> np.ndarray:
    return np.random.default_rng(_name_seed(name, "val")).integers(0, NUM_QUESTIONS, max_samples)
