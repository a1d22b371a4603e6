"""The rule-adherence lens: declared rules, their presence in the model's requests, the judge's
verdict on each, and per-rule aggregates and flips (see :mod:`evalcore.rules.scorer`)."""

from evalcore.rules.aggregate import RuleAggregate, RuleFlip, flip_counts, rule_aggregates, rule_flips, rule_rows
from evalcore.rules.model import (
    RULES_FILE,
    Rule,
    RuleError,
    case_rules,
    load_rules_file,
    merge_rules,
    parse_rules,
    target_rules,
)
from evalcore.rules.presence import DEFAULT_FUZZY_THRESHOLD, ModelRequest, model_requests, rule_presence
from evalcore.rules.scorer import OUTCOMES, RuleAdherence, bind_target_rules

__all__ = [
    "DEFAULT_FUZZY_THRESHOLD",
    "OUTCOMES",
    "RULES_FILE",
    "ModelRequest",
    "Rule",
    "RuleAdherence",
    "RuleAggregate",
    "RuleError",
    "RuleFlip",
    "bind_target_rules",
    "case_rules",
    "flip_counts",
    "load_rules_file",
    "merge_rules",
    "model_requests",
    "parse_rules",
    "rule_aggregates",
    "rule_flips",
    "rule_presence",
    "rule_rows",
    "target_rules",
]
