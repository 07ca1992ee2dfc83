"""A hostile chat template (endless loops, huge output) fails fast with a clear error."""

from __future__ import annotations

import json
import time

import pytest

from tests.bad_input.checks import assert_one_line_error

pytest.importorskip("tokenizers")


def model_dir(folder, template: str):
    from tokenizers import Tokenizer, models, pre_tokenizers

    tokenizer = Tokenizer(models.WordLevel({"[UNK]": 0, "x": 1}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": template}))
    return folder


REQUEST = {"messages": [{"role": "user", "content": "x"}]}
NESTED = (
    "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}"
    "{{ messages[0].content }}"
)
HUGE = "{% for a in range(100000) %}{{ 'x' * 100000 }}{% endfor %}"


@pytest.mark.parametrize(
    ("template", "fragment", "limit_s"),
    [
        (NESTED, "ran longer than 0.5 s", 0.5),
        (HUGE, "more than 67,108,864", 30),
        ("{{ 'x' * 10**10 }}", "built 10,000,000,000 characters", 30),
        ("{{ 'x'|center(10**9) }}", "more than 67,108,864", 30),
        ("{{ 7 ** 1000000000 }}", "too large number", 30),
        (
            "{% macro f(n) %}{% if n %}{{ f(n-1) }}{{ f(n-1) }}{% endif %}{% endmacro %}"
            "{{ f(40) }}",
            "ran longer than 0.5 s",
            0.5,
        ),
    ],
)
def test_a_hostile_template_fails_fast(cli, tmp_path, monkeypatch, template, fragment, limit_s):
    from pcache.prompt.renderers import chat_jinja

    monkeypatch.setattr(chat_jinja, "TIME_LIMIT_S", limit_s)
    request = tmp_path / "request.json"
    request.write_text(json.dumps(REQUEST))
    model = model_dir(tmp_path, template)
    started = time.monotonic()
    result = cli("hash", request, "-t", model)
    elapsed = time.monotonic() - started
    assert_one_line_error(result, str(request), fragment)
    assert elapsed < limit_s + 10, elapsed


def test_a_bounded_template_renders_as_before():
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    from pcache.prompt.renderers.chat_jinja import make_environment

    source = (
        "{% for m in messages %}{{ loop.index }}/{{ loop.length }} {{ m.role ~ ': ' ~ m.content }}"
        "{% if not loop.last %}\n{% endif %}{% else %}none{% endfor %}"
        "{{ '%05d' % 42 }}{{ [1, 2] + [3] }}{{ 'ab' * 3 }}{{ 2 ** 10 }}"
    )
    messages = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    bounded = make_environment().from_string(source).render(messages=messages)
    plain = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    assert bounded == plain.from_string(source).render(messages=messages)
