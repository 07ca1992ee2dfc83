"""The lint rules: one module per rule, listed once here."""

from __future__ import annotations

from types import ModuleType

from pcache.rules import (
    pc101_clock_in_prefix,
    pc102_template_clock,
    pc103_random_id_in_prefix,
    pc104_per_user_in_shared_prefix,
    pc105_volatile_breakpoint_content,
    pc106_fewshot_reordered,
    pc107_whitespace_drift,
    pc108_image_instability,
    pc201_unsorted_schema_keys,
    pc202_reserialized_tool_arguments,
    pc203_tool_result_reserialized,
    pc204_number_formatting_drift,
    pc301_tool_order_changed,
    pc302_tool_set_changed,
    pc303_tool_definition_drift,
    pc304_tool_call_id_regenerated,
    pc305_mcp_nondeterminism_hint,
    pc401_history_not_append_only,
    pc402_sliding_window,
    pc403_compaction_or_clipping,
    pc404_reasoning_dropped,
    pc405_template_non_append_only,
    pc406_system_message_mid_history,
    pc501_below_min_cacheable,
    pc502_anthropic_too_many_breakpoints,
    pc503_anthropic_lookback_exceeded,
    pc504_anthropic_ttl_order,
    pc505_anthropic_param_change,
    pc506_no_cache_marker,
    pc507_openai_missing_cache_key,
    pc508_openai_cache_key_cardinality,
    pc509_openai_param_change,
    pc510_block_straddle,
    pc511_ttl_gap,
    pc512_cold_fanout,
)
from pcache.rules.base import Rule

REGISTRY: tuple[ModuleType, ...] = (
    pc101_clock_in_prefix,
    pc102_template_clock,
    pc103_random_id_in_prefix,
    pc104_per_user_in_shared_prefix,
    pc105_volatile_breakpoint_content,
    pc106_fewshot_reordered,
    pc107_whitespace_drift,
    pc108_image_instability,
    pc201_unsorted_schema_keys,
    pc202_reserialized_tool_arguments,
    pc203_tool_result_reserialized,
    pc204_number_formatting_drift,
    pc301_tool_order_changed,
    pc302_tool_set_changed,
    pc303_tool_definition_drift,
    pc304_tool_call_id_regenerated,
    pc305_mcp_nondeterminism_hint,
    pc401_history_not_append_only,
    pc402_sliding_window,
    pc403_compaction_or_clipping,
    pc404_reasoning_dropped,
    pc405_template_non_append_only,
    pc406_system_message_mid_history,
    pc501_below_min_cacheable,
    pc502_anthropic_too_many_breakpoints,
    pc503_anthropic_lookback_exceeded,
    pc504_anthropic_ttl_order,
    pc505_anthropic_param_change,
    pc506_no_cache_marker,
    pc507_openai_missing_cache_key,
    pc508_openai_cache_key_cardinality,
    pc509_openai_param_change,
    pc510_block_straddle,
    pc511_ttl_gap,
    pc512_cold_fanout,
)

PARSE_ERROR = Rule(
    code="PC000",
    name="unreadable-input",
    severity="error",
    summary="A file or line could not be read as a request",
)

RULES: dict[str, Rule] = {module.RULE.code: module.RULE for module in REGISTRY}
RULES[PARSE_ERROR.code] = PARSE_ERROR


def module_for(code: str) -> ModuleType | None:
    for module in REGISTRY:
        if module.RULE.code == code:
            return module
    return None


def documentation(code: str) -> str:
    """The rule's documentation (its module docstring)."""
    module = module_for(code)
    if module is None:
        return "Reported when a file or JSONL line is not valid JSON or not a request shape."
    return (module.__doc__ or "").strip()
