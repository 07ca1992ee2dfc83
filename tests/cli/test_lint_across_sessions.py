"""`pcache lint` on the logs teams have: the shared prefix broken across sessions and users.

Each case is a log as an application writes it (bodies recorded through an SDK, sessions with
their own ids), and the finding must name the one cause `pcache diff` names for the same pair,
charged what it loses.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

INSTRUCTIONS = " ".join(
    [
        "You are the support agent of Example Travel.",
        "Answer in the customer's language and cite the booking number you refer to.",
        "Never promise refunds the policy does not allow; hand over to a human on request.",
        "Keep answers to two or three sentences, then ask for what is missing.",
    ]
    * 6
)
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
        },
    }
    for name, description in [
        ("find_booking", "Look up a booking by its number or the customer's email address."),
        ("refund_policy", "Return the refund policy that applies to a booking."),
        ("hand_over", "Hand the conversation over to a human agent of the support team."),
    ]
]


def _write(tmp_path, lines: list[dict]):
    path = tmp_path / "log.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _lint(cli, path, *args):
    result = cli("lint", path, "--format", "json", *args)
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def _diff_rule(cli, tmp_path, a: dict, b: dict, *args) -> str | None:
    (tmp_path / "a.json").write_text(json.dumps(a))
    (tmp_path / "b.json").write_text(json.dumps(b))
    result = cli("diff", tmp_path / "a.json", tmp_path / "b.json", "--format", "json", *args)
    assert result.exit_code == 1, result.output
    rule = json.loads(result.stdout)["cause"]["rule"]
    return rule["code"] if rule else None


def test_a_clock_near_the_top_of_two_recorded_requests_is_an_error(cli, tmp_path):
    """Two requests through the OpenAI SDK, no session ids, identical but for the time."""
    bodies = [
        {
            "model": "gpt-4o",
            "messages": [
                {
                    "role": "system",
                    "content": f"Current time: 2026-11-29T09:14:0{n}Z\n{INSTRUCTIONS}",
                },
                {"role": "user", "content": "Where is my booking?"},
            ],
        }
        for n in (3, 9)
    ]
    lines = [{"url": "https://api.openai.com/v1/chat/completions", "body": b} for b in bodies]
    data = _lint(cli, _write(tmp_path, lines), "-t", "o200k_base")
    errors = [f for f in data["findings"] if f["severity"] == "error"]
    assert [f["code"] for f in errors] == ["PC101"], data["findings"]
    summary = data["summary"]
    second = summary["prompt_tokens"] // 2
    assert errors[0]["tokens_reprefilled"] >= 0.8 * second
    assert summary["if_fixed"]["reusable_tokens"] <= summary["if_fixed"]["prompt_tokens"]
    assert _diff_rule(cli, tmp_path, bodies[0], bodies[1], "-t", "o200k_base") == "PC101"


def test_a_minute_clock_in_every_session_is_a_clock_not_per_user_data(cli, tmp_path):
    start = datetime(2026, 11, 29, 9, 0, tzinfo=timezone.utc)
    lines = []
    for session in range(30):
        when = (start + timedelta(minutes=7 * session)).strftime("%Y-%m-%d %H:%M")
        lines.append(
            {
                "session_id": f"s{session}",
                "user": f"u{session % 3}",
                "messages": [
                    {"role": "system", "content": f"{INSTRUCTIONS}\nNow: {when}\nBe kind."},
                    {"role": "user", "content": f"Question {session} about my booking"},
                ],
                "tools": TOOLS,
            }
        )
    data = _lint(cli, _write(tmp_path, lines), "-t", "o200k_base")
    codes = {f["code"] for f in data["findings"] if f["severity"] in ("error", "warning")}
    assert codes == {"PC101"}, data["findings"]
    assert _diff_rule(cli, tmp_path, lines[0], lines[1], "-t", "o200k_base") == "PC101"
    # the clock ends the shared part: moved into the newest turn, it frees less than a block
    assert data["summary"]["if_fixed"]["reusable_tokens"] >= data["summary"]["reusable_tokens"]


def test_a_profile_before_the_tools_is_per_user_data(cli, tmp_path):
    """gpt-oss renders the tools after the instructions: a profile at the end of the system
    prompt splits everything that follows it by user."""
    lines = [
        {
            "user": user,
            "metadata": {"session_id": f"s-{user}"},
            "messages": [
                {
                    "role": "system",
                    "content": f"{INSTRUCTIONS}\n\nCustomer: {name}, member since {year}.",
                },
                {"role": "user", "content": question},
            ],
            "tools": TOOLS,
        }
        for user, name, year, question in [
            ("u1", "Alice Moreau", 2014, "Where is my booking?"),
            ("u2", "Bob Lindqvist", 2019, "Can I change my flight?"),
            ("u3", "Chen Wei", 2021, "Do you allow pets?"),
        ]
    ]
    data = _lint(cli, _write(tmp_path, lines))
    charged = [f for f in data["findings"] if f["tokens_reprefilled"]]
    assert {f["code"] for f in charged} == {"PC104"}, data["findings"]
    assert len(charged) == 2
    assert _diff_rule(cli, tmp_path, lines[0], lines[1]) == "PC104"


def test_tools_in_a_per_session_order_are_charged_what_the_fix_recovers(cli, tmp_path):
    orders = [[0, 1, 2], [2, 0, 1], [1, 2, 0], [0, 2, 1], [2, 1, 0]]
    planted, fixed = [], []
    for session, order in enumerate(orders):
        for log, tools in ((planted, [TOOLS[i] for i in order]), (fixed, TOOLS)):
            log.append(
                {
                    "session_id": f"s{session}",
                    "messages": [
                        {"role": "system", "content": INSTRUCTIONS},
                        {"role": "user", "content": "Where is my booking?"},
                    ],
                    "tools": tools,
                }
            )
    data = _lint(cli, _write(tmp_path, planted), "-t", "o200k_base")
    charged = sum(f["tokens_reprefilled"] for f in data["findings"] if f["code"] == "PC301")
    clean = _lint(cli, _write(tmp_path, fixed), "-t", "o200k_base")
    recovered = data["summary"]["reprefilled_tokens"] - clean["summary"]["reprefilled_tokens"]
    assert abs(charged - recovered) <= 0.02 * recovered, (charged, recovered)
    if_fixed = data["summary"]["if_fixed"]
    assert if_fixed["reusable_tokens"] <= data["summary"]["prompt_tokens"]
    assert if_fixed["reusable_tokens"] == clean["summary"]["reusable_tokens"]


def test_customers_asking_the_same_question_are_separate_conversations(cli, tmp_path):
    lines = [
        {
            "model": "gpt-4o",
            "user": f"customer-{n}",
            "prompt_cache_key": f"key-{n}",
            "metadata": {"session_id": f"conv-{n}"},
            "messages": [
                {"role": "system", "content": INSTRUCTIONS},
                {"role": "user", "content": "What is your refund policy?"},
            ],
        }
        for n in range(3)
    ]
    data = _lint(cli, _write(tmp_path, lines), "--profile", "openai", "--select", "ALL")
    assert data["summary"]["sessions"] == 3
    assert not [f for f in data["findings"] if f["code"] == "PC508"], data["findings"]


def test_findings_in_anthropic_bodies_point_at_the_system_blocks(cli, tmp_path):
    text = f"{INSTRUCTIONS} Current time: 2026-11-29 09:14:03 UTC."
    first = {
        "session_id": "s1",
        "model": "claude-sonnet-4-6",
        "max_tokens": 64,
        "system": [{"type": "text", "text": text}],
        "messages": [{"role": "user", "content": "Where is my booking?"}],
    }
    second = json.loads(json.dumps(first))
    second["system"][0]["text"] = text.replace("09:14:03", "09:20:11")
    second["messages"] += [
        {"role": "assistant", "content": "Checking."},
        {"role": "user", "content": "Thanks"},
    ]
    data = _lint(cli, _write(tmp_path, [first, second]), "-t", "o200k_base")
    paths = {(f["code"], f["severity"], f["json_path"]) for f in data["findings"]}
    assert ("PC101", "error", "system[0].text") in paths, data["findings"]


def test_a_reasoning_effort_change_is_a_parameter_not_the_template(cli, tmp_path):
    first = {
        "session_id": "s1",
        "model": "gpt-oss-120b",
        "reasoning_effort": "low",
        "messages": [
            {"role": "system", "content": INSTRUCTIONS},
            {"role": "user", "content": "Where is my booking?"},
        ],
    }
    second = json.loads(json.dumps(first))
    second["reasoning_effort"] = "high"
    second["messages"] += [
        {"role": "assistant", "content": "Checking."},
        {"role": "user", "content": "Thanks"},
    ]
    data = _lint(cli, _write(tmp_path, [first, second]), "--select", "ALL")
    codes = {f["code"] for f in data["findings"] if f["tokens_reprefilled"]}
    assert "PC405" not in {f["code"] for f in data["findings"]}, data["findings"]
    assert codes == {"PC509"}, data["findings"]


def test_write_fixed_to_a_place_it_cannot_write_is_a_usage_error(cli, tmp_path):
    log = _write(tmp_path, [{"messages": [{"role": "user", "content": "hi"}]}])
    for target in (tmp_path / "missing" / "fixed.jsonl", tmp_path):
        result = cli("lint", log, "--write-fixed", target)
        assert result.exit_code == 2, result.output
        assert "--write-fixed" in result.output and "Traceback" not in result.output
        assert not (tmp_path / "missing").exists()
