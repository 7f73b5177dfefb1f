"""Simulated task containers for the race (``bench/race.py``): a 12-queue ticket router.

Each ticket belongs to one of 12 queues in 4 groups of 3 look-alike queues. The simulated
student routes a ticket right when the prompt states the rule for its queue (the exact rule
sentence, as the verifier feedback quotes it); a reflection model that reads the feedback can
therefore fix the prompt one rule at a time. Three tasks with different structure:

- ``additive``: the rules are independent; every rule added fixes its queue's tickets.
- ``interacting``: the second and third queue of each group are look-alikes: with both of
  their rules in the prompt and nothing saying how to tell them apart, the student follows
  the rule that comes last for the tickets of both, until the prompt also states the group's
  disambiguation rule (which the feedback of a misrouted ticket quotes). Appending the second
  look-alike's rule fixes its tickets and breaks the other's, so a search that only accepts
  a better train mean stalls at 8 of 12 rules; it must keep a candidate that wins other
  seeds (the Pareto frontier) and build on it.
- ``noisy``: additive, but the student is right with probability 0.9 when the rule is present
  and 0.1 when it is not, drawn afresh for each call (seeded by the prompt, the ticket, the
  race seed and how often that pair was asked), so the same prompt scores differently.

The baseline prompt states 2 of the 12 rules (from different groups): 1/6 of the tickets.
Seeds: 24 train (2 per queue) and 36 holdout (3 per queue), no val.

Serve with ``python bench/race_tasks.py --task additive --port 8701 --latency 0.3``; each
``POST /rollout`` waits ``--latency`` seconds (concurrent requests overlap). ``GET /stats``
counts the rollouts; ``POST /reset`` zeroes the counters and the noise history.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import random
from collections import Counter
from dataclasses import dataclass, field

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

TASKS = ("additive", "interacting", "noisy")

GROUPS: dict[str, tuple[str, ...]] = {
    "payments": ("billing", "refunds", "invoices"),
    "identity": ("access", "security", "accounts"),
    "logistics": ("shipping", "returns", "warehouse"),
    "platform": ("api", "outages", "integrations"),
}
GROUP_OF = {q: g for g, qs in GROUPS.items() for q in qs}
# The second and third queue of each group are confused with each other (task interacting).
LOOKALIKE = {a: b for _, x, y in GROUPS.values() for a, b in ((x, y), (y, x))}
QUEUES = tuple(q for qs in GROUPS.values() for q in qs)

RULES = {
    "billing": "Card charges, failed payments and payment methods go to billing.",
    "refunds": "Requests to get money back for an order go to refunds.",
    "invoices": "Requests for invoices, receipts or VAT documents go to invoices.",
    "access": "Login problems, forgotten passwords and 2FA codes go to access.",
    "security": "Suspicious activity, phishing and hacked accounts go to security.",
    "accounts": "Changes to the account's name, email or plan go to accounts.",
    "shipping": "Where is my parcel and delivery dates go to shipping.",
    "returns": "Sending an item back or exchanging it goes to returns.",
    "warehouse": "Wrong, missing or damaged items in a parcel go to warehouse.",
    "api": "API keys, rate limits and SDK errors go to api.",
    "outages": "The site or app being down or slow goes to outages.",
    "integrations": "Connecting third-party apps and webhooks goes to integrations.",
}
DISAMBIGUATION = {
    "payments": (
        "Payments: money back is refunds, a document is invoices, anything else about a "
        "charge is billing."
    ),
    "identity": (
        "Identity: cannot get in is access, someone else got in is security, changing "
        "details is accounts."
    ),
    "logistics": (
        "Logistics: not arrived yet is shipping, going back to us is returns, arrived wrong "
        "is warehouse."
    ),
    "platform": (
        "Platform: our code or keys is api, everything down is outages, another vendor's app "
        "is integrations."
    ),
}
TICKETS = {
    "billing": ("My card was charged twice", "Payment keeps failing at checkout"),
    "refunds": ("I want my money back for order", "Please refund the cancelled order"),
    "invoices": ("I need an invoice for my company", "Can you send a receipt with VAT"),
    "access": ("I can't log in anymore", "The 2FA code never arrives"),
    "security": ("Someone logged into my account", "I clicked a phishing link"),
    "accounts": ("Change the email on my account", "Upgrade me to the team plan"),
    "shipping": ("Where is my parcel", "When will my order be delivered"),
    "returns": ("How do I send this jacket back", "I'd like to exchange the size"),
    "warehouse": ("The box arrived with the wrong item", "One item was missing and one broken"),
    "api": ("The API returns 429 all the time", "My API key stopped working"),
    "outages": ("The app is down for everyone", "Your site has been very slow today"),
    "integrations": ("The Slack integration stopped posting", "Webhooks are not delivered"),
}
BASELINE_RULES = ("billing", "access")
TRAIN_PER_QUEUE, HOLDOUT_PER_QUEUE = 2, 3
NOISE_RIGHT, NOISE_GUESS = 0.9, 0.1


def baseline_prompt() -> str:
    """The prompt the optimizers start from: the queue list and two rules."""
    rules = "\n".join(f"- {RULES[q]}" for q in BASELINE_RULES)
    return (
        f"Route the customer's support ticket to one queue: {', '.join(QUEUES)}. "
        f"Answer with the queue name only.\nRules:\n{rules}"
    )


@dataclass(frozen=True)
class Ticket:
    """One seed: its queue and what the customer wrote."""

    name: str
    queue: str
    text: str


def tickets(split_seed: int = 0) -> tuple[list[Ticket], list[Ticket]]:
    """Train and holdout tickets; names do not reveal the queue."""
    rng = random.Random(split_seed)
    rows: list[tuple[str, str, str]] = []
    for queue in QUEUES:
        for i in range(TRAIN_PER_QUEUE + HOLDOUT_PER_QUEUE):
            split = "train" if i < TRAIN_PER_QUEUE else "holdout"
            base = TICKETS[queue][i % 2]
            rows.append((split, queue, f"{base} (ref {rng.randrange(10_000, 99_999)})"))
    rng.shuffle(rows)
    train, holdout = [], []
    for i, (split, queue, text) in enumerate(rows):
        (train if split == "train" else holdout).append(Ticket(f"ticket-{i:03d}", queue, text))
    return train, holdout


def _has(prompt: str, sentence: str) -> bool:
    return sentence.lower() in prompt.lower()


def _last(prompt: str, a: str, b: str) -> str:
    """Of two queues whose rules are both in the prompt, the one whose rule comes later."""
    text = prompt.lower()
    return a if text.rfind(RULES[a].lower()) > text.rfind(RULES[b].lower()) else b


@dataclass
class Student:
    """The simulated student of one task: a pure function of (prompt, ticket) but for noise."""

    task: str
    seed: int = 0
    asked: Counter[tuple[str, str]] = field(default_factory=Counter)

    def answer(self, prompt: str, ticket: Ticket) -> tuple[str, float, str]:
        """(predicted queue, reward, verifier feedback)."""
        q, group = ticket.queue, GROUP_OF[ticket.queue]
        present = [x for x in QUEUES if _has(prompt, RULES[x])]
        same_group = [x for x in present if GROUP_OF[x] == group and x != q]
        guess = same_group[0] if same_group else "general"
        rival = LOOKALIKE.get(q)
        correct = (q, 1.0, f"correct: {q}")
        if q not in present:
            if self.task == "noisy" and self._draw(prompt, ticket) < NOISE_GUESS:
                return correct
            return guess, 0.0, self._lacks(guess, q, RULES[q])
        confused = rival in present and not _has(prompt, DISAMBIGUATION[group])
        if self.task == "interacting" and confused and _last(prompt, str(rival), q) == rival:
            feedback = (
                f"routed to {rival}, expected {q}: the prompt has rules for both and "
                f'does not say how to tell them apart. Needed rule: "{DISAMBIGUATION[group]}"'
            )
            return str(rival), 0.0, feedback
        if self.task == "noisy" and self._draw(prompt, ticket) >= NOISE_RIGHT:
            return guess, 0.0, self._lacks(guess, q, RULES[q], noisy=True)
        return correct

    def _draw(self, prompt: str, ticket: Ticket) -> float:
        """A fresh uniform draw for this (prompt, ticket), reproducible for the race seed."""
        key = (hashlib.sha256(prompt.encode()).hexdigest(), ticket.name)
        self.asked[key] += 1
        return random.Random(f"{self.seed}:{key[0]}:{key[1]}:{self.asked[key]}").random()

    @staticmethod
    def _lacks(predicted: str, expected: str, rule: str, *, noisy: bool = False) -> str:
        why = (
            "the student did not apply the rule this time"
            if noisy
            else "the prompt lacks the rule for this queue"
        )
        return f'routed to {predicted}, expected {expected}: {why}. Needed rule: "{rule}"'


def create_app(task: str, latency: float, seed: int = 0) -> Starlette:
    """The container of ``task`` speaking ``gepa-container/1``."""
    if task not in TASKS:
        raise SystemExit(f"--task must be one of {', '.join(TASKS)} (got {task!r})")
    train, holdout = tickets()
    by_name = {t.name: t for t in train + holdout}
    student = Student(task, seed)
    stats: Counter[str] = Counter()
    program = {
        "protocol": "gepa-container/1",
        "program_id": f"race-router-{task}",
        "fingerprint": hashlib.sha256(f"race-router-{task}-v1-{seed}".encode()).hexdigest(),
        "description": (
            "Route a customer support ticket to one of 12 queues. The student follows the "
            "rules in its system prompt; the verifier quotes the rule it needed."
        ),
        "components": [
            {
                "name": "system_prompt",
                "kind": "prompt",
                "description": "System prompt of the ticket router.",
                "text": baseline_prompt(),
            }
        ],
        "seeds": {
            "train": [t.name for t in train],
            "val": [],
            "holdout": [t.name for t in holdout],
        },
        "objectives": ["reward"],
        "metadata": {"task": task},
    }

    async def health(_: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", "protocol": "gepa-container/1"})

    async def get_program(_: Request) -> JSONResponse:
        return JSONResponse(program)

    async def rollout(request: Request) -> JSONResponse:
        body = await request.json()
        ticket = by_name.get(body.get("seed"))
        prompt = (body.get("candidate") or {}).get("system_prompt")
        if ticket is None or not isinstance(prompt, str):
            return JSONResponse({"error": "unknown seed or missing system_prompt"}, 400)
        stats["rollouts"] += 1
        await asyncio.sleep(latency)
        output, reward, feedback = student.answer(prompt, ticket)
        return JSONResponse(
            {
                "reward": reward,
                "objectives": {"reward": reward},
                "output": output,
                "feedback": feedback,
                "trace": {
                    "messages": [
                        {"role": "user", "content": ticket.text},
                        {"role": "assistant", "content": output},
                    ]
                },
                "usage": {"input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0},
                "error": None,
            }
        )

    async def get_stats(_: Request) -> JSONResponse:
        return JSONResponse(dict(stats))

    async def reset(_: Request) -> JSONResponse:
        stats.clear()
        student.asked.clear()
        return JSONResponse({"ok": True})

    return Starlette(
        routes=[
            Route("/health", health),
            Route("/program", get_program),
            Route("/rollout", rollout, methods=["POST"]),
            Route("/stats", get_stats),
            Route("/reset", reset, methods=["POST"]),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", required=True, choices=TASKS)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--latency", type=float, default=0.3, help="seconds per rollout")
    parser.add_argument("--seed", type=int, default=0, help="noise seed (noisy task)")
    args = parser.parse_args()
    uvicorn.run(
        create_app(args.task, args.latency, args.seed),
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
    )


if __name__ == "__main__":
    main()
