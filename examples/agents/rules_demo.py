"""The rule-adherence lens on a small support agent: three rules, two prompt templates.

The agent answers a multi-turn conversation (case input ``{"turns": [...]}``), one model call per
user turn, rebuilding its system prompt from a template at every turn (as many production agents
do) and recording each request on its ``chat`` span (``request_messages``), so the trace shows
what the model actually received.

Rules (R1 and R2 declared on the target, R3 in ``rules.toml`` beside this file; a case may add
its own in ``metadata.rules``):

* R1 "Always answer in English."
* R2 "Never quote a price in {currency}; point the customer to the pricing page instead."
  (templated: the agent fills in the currency)
* R3 "Sign every reply as Ada from Support."

Variants:

* ``full``: every turn uses the full template.
* ``lean``: turn 1 uses the full template, later turns a shorter "follow-up" template that lost R2
  (the plumbing bug the lens is for): ``rule_adherence`` reports R2 ``rule_absent`` (present in
  turn 1, then dropped) from the trace alone, with no model.

The agent's model is ``$EVALSITE_MODEL`` when set (e.g. ``local:smollm2``), else an offline
scripted support model that follows whatever rules it is shown (it quotes a price once R2 is gone).
Run it::

    evalsite eval examples/agents --set examples/sets/rules_demo.jsonl --target rules-demo --variant lean
"""

from __future__ import annotations

import os
from typing import Any

from evalcore.discovery import TargetSpec
from evalcore.runtime.models import ChatModel
from evalcore.runtime.scripted import FunctionModel
from evalcore.targets import RunContext
from evalcore.types import TargetOutput

RULES = [
    {"id": "R1", "text": "Always answer in English."},
    {"id": "R2", "text": "Never quote a price in {currency}; point the customer to the pricing page instead."},
]

FULL_TEMPLATE = (
    "You are the support assistant of Acme Cloud.\n"
    "Always answer in English.\n"
    "Never quote a price in {currency}; point the customer to the pricing page instead.\n"
    "Sign every reply as Ada from Support."
)
FOLLOWUP_TEMPLATE = (
    "You are the support assistant of Acme Cloud. Keep follow-up answers short.\n"
    "Always answer in English.\n"
    "Sign every reply as Ada from Support."
)


def support_reply(messages: list[dict[str, Any]]) -> str:
    """The offline model: answers the last user turn, following the rules in its system prompt."""
    system = next((str(m.get("content")) for m in messages if m.get("role") == "system"), "")
    question = next((str(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), "")
    if any(word in question.lower() for word in ("price", "cost", "how much")):
        if "Never quote a price" in system:
            answer = "Prices are listed on acme.example/pricing."
        else:
            answer = "The Pro plan costs 20 EUR a month."
    else:
        answer = "Yes, we can help with that."
    if "Sign every reply" in system:
        answer += "\n-- Ada from Support"
    return answer


def default_model() -> ChatModel:
    """``$EVALSITE_MODEL`` when set, else the offline :func:`support_reply` model."""
    if os.environ.get("EVALSITE_MODEL"):
        from evalcore.runtime.openai_client import model_from_settings

        return model_from_settings()
    return FunctionModel(support_reply, name="scripted:support")


class TemplatedAgent:
    """A multi-turn agent that renders its system prompt from a template at every turn.

    Args:
        model: The chat model.
        first: Template of turn 1's system prompt.
        followup: Template of later turns' system prompt.
        currency: Fills ``{currency}``.
        name: The agent's name.
    """

    kind = "agent"
    self_traced = True

    def __init__(self, model: ChatModel, first: str, followup: str, currency: str = "EUR", name: str = "support"):
        self.model, self.first, self.followup, self.currency, self.name = model, first, followup, currency, name

    async def run(self, input: Any, ctx: RunContext) -> TargetOutput:
        turns = input.get("turns") if isinstance(input, dict) else [input]
        history: list[dict[str, Any]] = []
        answer = ""
        tokens_in = tokens_out = 0
        with ctx.tracer.span("invoke_agent", self.name, model=self.model.name):
            for index, text in enumerate(turns or []):
                template = self.first if index == 0 else self.followup
                system = {"role": "system", "content": template.replace("{currency}", self.currency)}
                history.append({"role": "user", "content": str(text)})
                ctx.tracer.message("user", role="user", content=str(text))
                request = [system, *history]
                with ctx.tracer.span(
                    "chat", self.model.name, model=self.model.name, step=index, request_messages=request
                ) as span:
                    response = await self.model.complete(request, temperature=0.0, seed=0)
                    answer = response.content or ""
                    tokens_in += response.tokens_in or 0
                    tokens_out += response.tokens_out or 0
                    ctx.tracer.message("assistant", role="assistant", content=answer)
                    span.set(finish_reason=response.finish_reason, tokens_in=response.tokens_in)
                history.append({"role": "assistant", "content": answer})
        return TargetOutput(
            output=answer,
            model=self.model.name,
            tokens_in=tokens_in or None,
            tokens_out=tokens_out or None,
            metadata={"turns": len(turns or [])},
        )


_model = default_model()

rules_demo = TargetSpec(
    id="rules-demo",
    variants={
        "full": TemplatedAgent(_model, FULL_TEMPLATE, FULL_TEMPLATE),
        "lean": TemplatedAgent(_model, FULL_TEMPLATE, FOLLOWUP_TEMPLATE),
    },
    default_variant="full",
    rules=RULES,
    scorers=["rule_adherence"],
    description="support agent with three rules; variant lean drops R2 after turn 1",
    default_set="../sets/rules_demo.jsonl",
    input_kind="json",
)
