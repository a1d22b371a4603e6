"""The rubric LLM judge: scorer, answer parsing, verdict rule, cache, agreement with humans."""

from evalcore.judge.agreement import (
    Agreement,
    Confusion,
    LabelledPairs,
    agreement,
    judge_agreement,
    pair_with_labels,
    read_label,
)
from evalcore.judge.cache import InMemoryJudgeCache, JudgeCache, SqliteJudgeCache, judge_cache_key, judge_endpoint
from evalcore.judge.outcome import JUDGE_SCORE
from evalcore.judge.parsing import AXES, JudgeParseError, JudgeVerdict, ParseErrorKind, parse_judge_answer
from evalcore.judge.prompt import (
    PROMPTS,
    RUBRIC_V1,
    RUBRIC_V2,
    DataBlock,
    PromptTemplate,
    answer_schema,
    data_block,
    get_prompt,
    register_prompt,
)
from evalcore.judge.rubric import RubricJudge
from evalcore.judge.summary import count_unstable, format_n, judge_usage
from evalcore.judge.verdict import Majority, Thresholds, majority, majority_score

__all__ = [
    "AXES",
    "JUDGE_SCORE",
    "PROMPTS",
    "RUBRIC_V1",
    "RUBRIC_V2",
    "Agreement",
    "Confusion",
    "DataBlock",
    "InMemoryJudgeCache",
    "JudgeCache",
    "JudgeParseError",
    "JudgeVerdict",
    "LabelledPairs",
    "Majority",
    "ParseErrorKind",
    "PromptTemplate",
    "RubricJudge",
    "SqliteJudgeCache",
    "Thresholds",
    "agreement",
    "answer_schema",
    "count_unstable",
    "data_block",
    "format_n",
    "get_prompt",
    "judge_agreement",
    "judge_cache_key",
    "judge_endpoint",
    "judge_usage",
    "majority",
    "majority_score",
    "pair_with_labels",
    "parse_judge_answer",
    "read_label",
    "register_prompt",
]
