"""`lint --fix` changes only the bytes it must, through links, or refuses saying why."""

from __future__ import annotations

import json
import os

from tests.bad_input.checks import assert_one_line_error, unchanged

UNSORTED = (
    '{\r\n  "messages": [{"role": "user", "content": "caf\\u00e9 \\"q\\""}],\r\n'
    '  "tools": [\r\n'
    '    {"type": "function", "function": {"name": "zeta", "parameters": {"type": "object",'
    ' "properties": {"b": {"type": "number", "default": 1.50}, "a": {"type": "string"}}}}},\r\n'
    '    {"type": "function", "function": {"name": "alpha", "parameters": {}}}\r\n'
    "  ]\r\n}\r\n"
)
FIXED = (
    '{\r\n  "messages": [{"role": "user", "content": "caf\\u00e9 \\"q\\""}],\r\n'
    '  "tools": [\r\n'
    '    {"type": "function", "function": {"name": "alpha", "parameters": {}}},\r\n'
    '    {"type": "function", "function": {"name": "zeta", "parameters": {"properties":'
    ' {"a": {"type": "string"}, "b": {"default": 1.50, "type": "number"}}, "type": "object"}}}'
    "\r\n  ]\r\n}\r\n"
)


def test_only_the_sorted_members_move(cli, tmp_path):
    real = tmp_path / "real.json"
    real.write_bytes(b"\xef\xbb\xbf" + UNSORTED.encode())
    real.chmod(0o640)
    link = tmp_path / "link.json"
    link.symlink_to(real.name)
    result = cli("lint", link, "--fix", "-f", "concise")
    assert result.exit_code in (0, 1), result.output
    assert link.is_symlink() and os.readlink(link) == real.name
    assert real.read_bytes() == b"\xef\xbb\xbf" + FIXED.encode()
    assert real.stat().st_mode & 0o777 == 0o640
    assert json.loads(FIXED)["messages"] == json.loads(UNSORTED)["messages"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "real.json"]


def test_without_fix_nothing_changes(cli, tmp_path):
    (tmp_path / "a.json").write_text(UNSORTED)
    with unchanged(tmp_path):
        assert cli("lint", tmp_path / "a.json", "--select", "PC201").exit_code == 1


def test_a_hard_linked_file_is_refused_before_any_write(cli, tmp_path):
    first = tmp_path / "first.json"  # another session, fixable too, and sorted first
    first.write_text(UNSORTED.replace("caf", "tea").replace("zeta", "omega"))
    second = tmp_path / "second.json"
    second.write_text(UNSORTED)
    os.link(second, tmp_path / "second-link.json")
    with unchanged(tmp_path):
        result = cli("lint", first, second, "--fix")
    assert_one_line_error(result, str(second), "2 hard links")
