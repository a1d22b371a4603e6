"""A stand-in judge answering Ragas', DeepEval's and autoevals' prompts with the JSON each expects.

Each library's prompt text and parser were read from the installed packages (ragas 0.4.3,
deepeval 4.3.1, autoevals 0.4.1):

* Ragas ``Faithfulness`` (instructor, JSON mode): the statement prompt ("analyze the complexity of
  each sentence") wants ``{"statements": [str]}``; the NLI prompt ("judge the faithfulness of a
  series of statements") wants ``{"statements": [{"statement", "reason", "verdict": 0|1}]}``.
* DeepEval ``AnswerRelevancyMetric`` (``trimAndLoadJson`` on plain text): "breakdown and generate
  a list of statements" -> ``{"statements": [str]}``; "determine whether each statement is
  relevant" -> ``{"verdicts": [{"verdict": "yes"|"no"|"borderline", "reason"?}]}``; "provide a
  CONCISE reason for the score" -> ``{"reason": str}``. ``GEval``: "generate 3-4 concise evaluation
  steps" -> ``{"steps": [str]}``; "You are an evaluator" -> ``{"score": 0..10, "reason": str}``.
* autoevals ``Factuality`` / ``ClosedQA``: a forced ``select_choice`` tool call with
  ``{"reasons": str, "choice": "A".."E" | "Y"|"N"}``.

A prompt holding a ``fail`` marker (a case's question) gets prose instead: invalid JSON for
Ragas and DeepEval, no tool call for autoevals. Every prompt text seen is kept in ``prompts``.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from tests.support.stand_in_llm import completion_body


class LibraryJudge:
    """The responder (``StandInLLM(responder=LibraryJudge(...))``).

    Args:
        fail: Texts whose presence in a prompt makes the answer unreadable.
        unsupported: A statement verdict of 0 (Ragas) / ``no`` (DeepEval) is given for prompts
            holding any of these texts; every other statement is supported.
    """

    def __init__(self, fail: tuple[str, ...] = (), unsupported: tuple[str, ...] = ()) -> None:
        self.fail = fail
        self.unsupported = unsupported
        self.prompts: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        text = "\n".join(_content(m) for m in body.get("messages") or [])
        with self._lock:
            self.prompts.append(text)
        if any(marker in text for marker in self.fail):
            return completion_body("I would rather not say.")
        bad = any(marker in text for marker in self.unsupported)
        if body.get("tools"):
            choice = "D" if bad else "C"
            if "[Criterion]" in text:
                choice = "N" if bad else "Y"
            arguments = {"reasons": f"the submission and the expert agree: {choice}", "choice": choice}
            return completion_body(None, tool_calls=[{"name": "select_choice", "arguments": arguments}])
        return completion_body(json.dumps(self._answer(text, bad)))

    def _answer(self, text: str, bad: bool) -> dict[str, Any]:
        if "analyze the complexity of each sentence" in text:
            return {"statements": ["The answer states the fact asked for."]}
        if "judge the faithfulness of a series of statements" in text:
            return {
                "statements": [
                    {
                        "statement": "The answer states the fact asked for.",
                        "reason": "the context does not say so" if bad else "the context says so",
                        "verdict": 0 if bad else 1,
                    }
                ]
            }
        if "breakdown and generate a list of statements" in text:
            return {"statements": ["The answer states the fact asked for."]}
        if "determine whether each statement is relevant" in text:
            return {"verdicts": [{"verdict": "no", "reason": "off topic"} if bad else {"verdict": "yes"}]}
        if "CONCISE reason for the score" in text:
            return {"reason": "the statement addresses the question" if not bad else "the statement is off topic"}
        if "generate 3-4 concise evaluation steps" in text:
            return {"steps": ["Check the answer against the question.", "Check that the answer is correct."]}
        if "You are an evaluator. Given the following" in text:
            return {"score": 2 if bad else 9, "reason": "the answer is wrong" if bad else "the answer is right"}
        return {"error": "the stand-in judge does not know this prompt"}


def _content(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content or "")
