"""Test assertions over captured requests: prefixes that only grow, and enough of them cached.

`assert_prefix_stable` compares consecutive requests of each conversation (requests with the same
`session_id`, or all of them when none has one) as `pcache diff` does; a failure names the cause,
the JSON path and the token where the prefix breaks. `assert_cacheable` computes the share of
prompt tokens a cache reuses over the whole sequence, as `pcache lint` reports it.
"""

from __future__ import annotations

from typing import Any

STABLE_KINDS = ("append", "identical")


def _describe(index_a: int, index_b: int, result: Any) -> str:
    cause = result.cause
    where = cause.b_path or "(template text)"
    if cause.a_path and cause.a_path != cause.b_path:
        where = f"{cause.a_path} in A, {where} in B"
    reused = result.reusable_tokens.get("vllm", 0)
    lines = [
        f"requests[{index_a}] -> requests[{index_b}]: the cached prefix breaks",
        f"  cause: {cause.kind} — {cause.summary}" + (f" ({cause.detail})" if cause.detail else ""),
        f"  at: {where}",
    ]
    if result.first_divergence_token is not None:
        lines.append(
            f"  token: {result.first_divergence_token:,} (block {result.first_divergent_block});"
            f" {reused:,} of {result.num_tokens[1]:,} tokens of B reusable on vllm"
        )
    if cause.a_excerpt or cause.b_excerpt:
        lines.append(f"  A: {cause.a_excerpt!r}")
        lines.append(f"  B: {cause.b_excerpt!r}")
    lines.append(f"  fix: {cause.hint}")
    return "\n".join(lines)


def assert_prefix_stable(
    requests: Any,
    *,
    tokenizer: str | None = None,
    block_size: int | None = None,
    date: str | None = None,
) -> None:
    """Fail unless each request of a conversation extends the previous one's prompt.

    `requests`: body dicts, recorded lines, SDK objects, `Request`s or paths, in sending order.
    Tokenizer, block size and date default to the command line's.
    """
    __tracebackhide__ = True  # pytest shows the caller's line, not this function's
    from pcache import api_arguments as check
    from pcache.divergence.compare import diff
    from pcache.pipeline import Settings, hash_request
    from pcache.prompt.reading.held import requests_from

    function = "record.assert_prefix_stable"
    requests = check.requests(function, "requests", requests)
    given = check.settings_values(function, tokenizer=tokenizer, block_size=block_size, date=date)
    with check.named_as(function, tuple(given)):
        settings = Settings(**given)
    latest: dict[str | None, tuple[int, Any]] = {}
    failures = []
    for index, request in enumerate(requests_from(requests)):
        hashed = hash_request(request, settings)
        previous = latest.get(request.session_id)
        latest[request.session_id] = (index, hashed)
        if previous is None:
            continue
        result = diff(previous[1], hashed)
        if result.cause is not None and result.cause.kind not in STABLE_KINDS:
            failures.append(_describe(previous[0], index, result))
    if failures:
        raise AssertionError("\n".join(failures))


def assert_cacheable(
    requests: Any,
    min_ratio: float,
    *,
    profile: str = "vllm",
    tokenizer: str | None = None,
    block_size: int | None = None,
) -> float:
    """Fail unless a `profile` cache reuses at least `min_ratio` of all prompt tokens.

    The ratio is `pcache lint`'s "cacheable tokens as is" over the requests in order; it is
    returned when the assertion holds. The failure lists the findings that explain the loss.
    `min_ratio` is a number from 0 to 1 (NaN is refused, as any other bad argument, with a
    `pcache.InputError`).
    """
    __tracebackhide__ = True
    from pcache import api_arguments as check
    from pcache.defaults import PROFILE_NAMES
    from pcache.pipeline import Settings
    from pcache.prompt.reading.held import values_from
    from pcache.rules.runner import LintOptions, lint_values

    function = "record.assert_cacheable"
    requests = check.requests(function, "requests", requests)
    min_ratio = check.number(function, "min_ratio", min_ratio, 0.0, 1.0)
    profile = check.text(function, "profile", profile, PROFILE_NAMES)
    given = check.settings_values(function, tokenizer=tokenizer, block_size=block_size)
    options = LintOptions(settings=Settings(**given, profile=profile))
    report = lint_values(values_from(requests), options, source="requests")
    summary = report.summary
    ratio = summary.cacheable_ratio
    if ratio < min_ratio:
        lines = [
            f"cacheable tokens ({profile}, {summary.tokenizer}): {ratio:.1%}"
            f" ({summary.reusable_tokens:,} of {summary.prompt_tokens:,}), below {min_ratio:.1%}"
        ]
        for finding in report.diagnostics[:10]:
            lines.append(
                f"  requests[{finding.line - 1}] {finding.code} {finding.name} at"
                f" {finding.json_path or '(template)'}: {finding.message}"
            )
        raise AssertionError("\n".join(lines))
    return ratio
