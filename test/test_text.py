"""The text format: `bril.ir.text` in process, and the `bril2json`/`bril2txt` commands.

Corpus cases run in process (fast); a few subprocess tests check what users
see from the real console scripts: stdin/stdout, `-p`, and one-line errors
with exit code 2.
"""

import json
import math
import shutil
import subprocess
import sys

from hypothesis import HealthCheck, given, settings, strategies as st
import pytest

from bril.ir.errors import BrilError
from bril.ir.printer import format_program
from bril.ir.text import parse_program
from corpus import BENCHMARKS, CONFORMANCE, args_of, bril_files, case_id
from strategies import programs

PARSE_CASES = bril_files("test", "parse")
PRINT_CASES = sorted((CONFORMANCE / "test" / "print").glob("*.json"))
ALL_BRIL = bril_files() + bril_files(root=BENCHMARKS)


def _id(path):
    root = BENCHMARKS if BENCHMARKS in path.parents else CONFORMANCE
    return ("ours/" if root is BENCHMARKS else "") + case_id(path, root)


def same(a, b):
    """Equal as JSON values, and int stays int, float stays float (-0.0 stays -0.0)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float):
        if math.isnan(a):
            return math.isnan(b)
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    return a == b


def main_instrs(src):
    return parse_program("@main {\n" + src + "\n}")["functions"][0]["instrs"]


def error_of(src, **kw):
    with pytest.raises(BrilError) as info:
        parse_program(src, **kw)
    return info.value


def test_corpus_is_present():
    assert PARSE_CASES and PRINT_CASES and len(ALL_BRIL) > 100, CONFORMANCE


# --- The corpus ------------------------------------------------------------------------

@pytest.mark.parametrize("path", PARSE_CASES, ids=case_id)
def test_parse_corpus(path):
    flags = args_of(path)
    assert set(flags) <= {"-p"}, flags
    got = parse_program(path.read_text(), positions="-p" in flags)
    assert got == json.loads(path.with_suffix(".json").read_text())


@pytest.mark.parametrize("path", PRINT_CASES, ids=case_id)
def test_print_corpus(path):
    expected = path.with_suffix(".bril").read_bytes().decode("utf-8")
    assert format_program(json.loads(path.read_text())) == expected


@pytest.mark.parametrize("path", ALL_BRIL, ids=_id)
def test_round_trip(path):
    """bril2json | bril2txt | bril2json is the identity on the JSON."""
    prog = parse_program(path.read_text())
    printed = format_program(prog)
    again = parse_program(printed)
    assert same(again, prog)
    assert format_program(again) == printed


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_round_trip_generated(prog):
    assert same(parse_program(format_program(prog)), prog)


# --- Parsing: literals -----------------------------------------------------------------

@pytest.mark.parametrize("literal, value", [
    ("1.1", 1.1), (".02", 0.02), ("0.3", 0.3), ("1.", 1.0), ("1e6", 1e6), ("1E-6", 1e-6),
    ("-1E+6", -1e6), ("+.11e12", 0.11e12), ("-0.0", -0.0), ("5e-324", 5e-324),
    ("1.7976931348623157e308", 1.7976931348623157e308),
])
def test_float_literals(literal, value):
    (instr,) = main_instrs(f"v: float = const {literal};")
    assert same(instr["value"], value)
    assert math.copysign(1, instr["value"]) == math.copysign(1, value)


@pytest.mark.parametrize("literal, value", [
    ("0", 0), ("-7", -7), ("+5", 5), ("9007199254740993", 9007199254740993),
    ("9223372036854775807", 2**63 - 1), ("-9223372036854775808", -2**63),
])
def test_int_literals_are_exact(literal, value):
    (instr,) = main_instrs(f"v: int = const {literal};")
    assert same(instr["value"], value)


def test_int_literal_beyond_64_bits():
    err = error_of("@main {\n  v: int = const 9223372036854775808;\n}")
    assert err.pos == (2, 18) and "64 bits" in err.message


def test_huge_float_literal_is_an_error():
    assert "out of range" in error_of("@main { v: float = const 1e999; }").message


def test_const_type_decides_number_kind():
    # An integer literal in a float const is a float; `any` keeps the literal's kind.
    f, a, af, b = main_instrs("f: float = const 4;\na: any = const 4;\n"
                              "af: any = const 4.0;\nb: bool = const true;")
    assert same(f["value"], 4.0) and same(a["value"], 4)
    assert same(af["value"], 4.0) and same(b["value"], True)


def test_const_type_is_not_checked_here():
    # Mismatches are the checker's to report (test/check/badconst), not syntax errors.
    a, c, d = main_instrs("a: bool = const 4;\nc: ptr<int> = const 2;\nd: blah = const 0;")
    assert (a["value"], c["type"], d["type"]) == (4, {"ptr": "int"}, "blah")


@pytest.mark.parametrize("literal, value", [
    ("'a'", "a"), ("'\\n'", "\n"), ("'\\0'", "\0"), ("'\\t'", "\t"), ("'\\a'", "\a"),
    ("'\\b'", "\b"), ("'\\v'", "\v"), ("'\\f'", "\f"), ("'\\r'", "\r"), ("'é'", "é"),
    ("'中'", "中"), ("'😀'", "😀"), ("'''", "'"), ("'\\'", "\\"), ("'#'", "#"), ("';'", ";"),
])
def test_char_literals(literal, value):
    (instr,) = main_instrs(f"c: char = const {literal};")
    assert instr["value"] == value
    assert format_program(parse_program(f"@main {{ c: char = const {literal}; }}")) == \
        f"@main {{\n  c: char = const {literal};\n}}\n"


@pytest.mark.parametrize("literal", ["'ab'", "'\\q'", "'😀x'"])
def test_char_literal_with_more_than_one_character(literal):
    err = error_of(f"@main {{\n  c: char = const {literal};\n}}")
    assert err.pos == (2, 19) and "one character" in err.message


# --- Parsing: structure ----------------------------------------------------------------

def test_function_signature():
    prog = parse_program("@f(a: int, p: ptr<ptr<float>>): ptr<bool> { ret p; }\n@main() {}")
    f, main = prog["functions"]
    assert f["args"] == [{"name": "a", "type": "int"},
                         {"name": "p", "type": {"ptr": {"ptr": "float"}}}]
    assert f["type"] == {"ptr": "bool"}
    # Empty parentheses and no return type: no `args` or `type` keys, as the reference.
    assert main == {"name": "main", "instrs": []}


def test_phi_arguments_and_labels_in_any_order():
    a, b = main_instrs("x: int = phi a .here b .there;\nx: int = phi a b .here .there;")
    assert a == b == {"op": "phi", "dest": "x", "type": "int",
                      "args": ["a", "b"], "labels": ["here", "there"]}


def test_every_extension_op():
    instrs = main_instrs("""
      p: ptr<int> = alloc n;  q: ptr<int> = ptradd p n;  store q n;  v: int = load q;  free p;
      c: char = int2char v;  i: int = char2int c;  e: bool = cge c c;
      f: float = bits2float i;  g: int = float2bits f;  h: bool = fle f f;
      set s v;  s: int = get;  u: float = undef;
      speculate;  guard e .out;  commit;
      d: any = id v;  r: int = call @fn a b;  call @g;
      .out:  nop;  ret;""")
    ops = [i.get("op", "label") for i in instrs]
    assert ops == ["alloc", "ptradd", "store", "load", "free", "int2char", "char2int", "cge",
                   "bits2float", "float2bits", "fle", "set", "get", "undef", "speculate",
                   "guard", "commit", "id", "call", "call", "label", "nop", "ret"]
    assert instrs[11] == {"op": "set", "args": ["s", "v"]}
    assert instrs[12] == {"op": "get", "dest": "s", "type": "int"}
    assert instrs[15] == {"op": "guard", "args": ["e"], "labels": ["out"]}
    assert instrs[17]["type"] == "any"
    assert instrs[18] == {"op": "call", "dest": "r", "type": "int",
                          "funcs": ["fn"], "args": ["a", "b"]}


def test_identifier_characters_and_soft_keywords():
    # Keywords (`true`, `false`, `const`, `from`, `import`, `as`) are names
    # wherever a name is expected.
    instrs = main_instrs("%x.1_y: int = id _a;\ntrue: bool = not false;\n"
                         "const: int = id const;\nret true;\n.L%0.a_b:\n"
                         "from: int = id import;\nas: int = id as;")
    assert instrs[0]["dest"] == "%x.1_y"
    assert instrs[1] == {"op": "not", "dest": "true", "type": "bool", "args": ["false"]}
    assert instrs[2]["args"] == ["const"]
    assert instrs[3] == {"op": "ret", "args": ["true"]}
    assert instrs[4] == {"label": "L%0.a_b"}
    assert instrs[5] == {"op": "id", "dest": "from", "type": "int", "args": ["import"]}
    assert instrs[6]["dest"] == "as"


def test_untyped_destination():
    (instr,) = main_instrs("x = add a b;")
    assert instr == {"op": "add", "dest": "x", "args": ["a", "b"]}


def test_comments_and_whitespace():
    prog = parse_program("# header\n\t@main {  # c1\r\n  v: int = const 42;# c2\n  # x: y\n}\n# end")
    assert prog == {"functions": [{"name": "main", "instrs": [
        {"op": "const", "dest": "v", "type": "int", "value": 42}]}]}


def test_imports():
    src = ('from "lib.json" import @f, @g as @h;\n'
           'from "dir/other lib.bril" import @main as @other_main;\n'
           "@main {\n  call @h;\n}\n")
    prog = parse_program(src)
    assert prog["imports"] == [
        {"path": "lib.json", "functions": [{"name": "f"}, {"name": "g", "alias": "h"}]},
        {"path": "dir/other lib.bril",
         "functions": [{"name": "main", "alias": "other_main"}]},
    ]
    assert format_program(prog) == src
    assert "imports" not in parse_program("@main {}")


def test_import_path_escapes_round_trip():
    prog = {"imports": [{"path": 'a"b\\c', "functions": [{"name": "f"}]}], "functions": []}
    assert parse_program(format_program(prog)) == prog


def test_positions():
    src = 'from "l.json" import @f;\n@main {\n  v: int = const 1;\n  print v;\n.l:\n}'
    prog = parse_program(src, positions=True)
    (func,) = prog["functions"]
    assert prog["imports"][0]["pos"] == {"row": 1, "col": 1}
    assert func["pos"] == {"row": 2, "col": 1}
    assert [i["pos"] for i in func["instrs"]] == [
        {"row": 3, "col": 3}, {"row": 4, "col": 3}, {"row": 5, "col": 1}]
    assert "src" not in func
    with_src = parse_program(src, positions=True, filename="/abs/l.bril")
    assert with_src["functions"][0]["instrs"][0]["src"] == "/abs/l.bril"
    # Positions are only added when asked for.
    assert "pos" not in parse_program(src)["functions"][0]


def test_bytes_input_and_byte_order_mark():
    assert parse_program("\ufeff@main {}".encode()) == parse_program("@main {}")
    assert "UTF-8" in error_of(b"@main { c: char = const '\xff'; }").message


# --- Parsing: errors -------------------------------------------------------------------

@pytest.mark.parametrize("src, pos, words", [
    ("@main {\n  v: int = const 1\n  print v;\n}", (3, 3), ["unexpected 'print'", "';'"]),
    ("@main {\n  v: int = const x;\n}", (2, 18), ["unexpected 'x'", "a number"]),
    ("@main {\n  v: int = const 1;\n", (3, 1), ["unexpected end of input", "'}'"]),
    ("@main { v: int = const 1; } }", (1, 29), ["unexpected '}'"]),
    ("@main {\n  v: ptr<int = id x;\n}", (2, 14), ["unexpected '='", "'>'"]),
    ("@main {\n  v: int = add a $b;\n}", (2, 18), ["unexpected character '$'"]),
    ("main {}", (1, 1), ["unexpected 'main'", "a @function"]),
    ("@main {\n  x: int = frob a;\n}", (2, 12), ["unknown opcode frob"]),
    ("@main {\n  const;\n}", (2, 3), ["const needs a destination"]),
])
def test_syntax_errors_name_row_and_column(src, pos, words):
    err = error_of(src)
    assert err.pos == pos
    for word in words:
        assert word in err.message
    assert "\n" not in str(err)


def test_error_names_the_file():
    err = error_of("@main { x }", filename="lib.bril")
    assert err.pos == (1, 11) and "lib.bril" in err.message


@pytest.mark.parametrize("src", ["", "  \n\t\n", b""])
def test_empty_input(src):
    assert "empty input" in error_of(src).message


# --- the fast path's tokens: its scanner in plain Python against the expression ----------

def _expression_tokens(text):
    import re
    from bril.ir import fastparse
    return re.compile("|".join(fastparse._TOKEN_ALTERNATIVES)).findall(text)


def test_the_scanner_reads_the_corpus_as_the_expression_does():
    from bril.ir import fastparse
    paths = bril_files() + bril_files(root=BENCHMARKS)
    assert len(paths) > 100
    for path in paths:
        text = path.read_text(encoding="utf-8", errors="surrogateescape")
        assert fastparse._scan(text) == _expression_tokens(text), path


# Characters each alternative of the expression turns on, blanks it skips and
# others it does not (a vertical tab, a Unicode digit, a non-ASCII letter).
_TOKEN_CHARS = list("aZ_%e.E09+-'\"\\#@{};:=<>,") + [
    " ", "\t", "\n", "\r", "\f", "\v", "\u0663", "\u03bb", "'\\n'", "'a'", '"x"', "1.5e-3"]


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(_TOKEN_CHARS), max_size=24).map("".join))
def test_the_scanner_reads_any_text_as_the_expression_does(text):
    from bril.ir import fastparse
    assert fastparse._scan(text) == _expression_tokens(text)


def test_a_long_text_is_read_by_the_expression(monkeypatch):
    from bril.ir import fastparse
    text = "@main { x: int = const 1; print x; }"
    monkeypatch.setattr(fastparse, "SCAN_CHARS", 8)
    monkeypatch.setattr(fastparse, "_scan", None)     # (never called for it)
    assert fastparse.tokens(text) == _expression_tokens(text)
    assert parse_program(text)["functions"][0]["instrs"][1]["op"] == "print"


def test_program_json_writes_what_json_dumps_writes():
    # bril2json's layout is the reference tool's: json.dumps(indent=2, sort_keys=True).
    from bril.ir.printer import program_json
    paths = bril_files() + bril_files(root=BENCHMARKS)
    for path in paths:
        try:
            prog = parse_program(path.read_bytes())
        except BrilError:
            continue
        for sort_keys in (True, False):
            assert program_json(prog, sort_keys) == json.dumps(prog, indent=2, sort_keys=sort_keys)
    odd = {"functions": [{"name": "f", "args": [{"name": "x", "type": {"ptr": {"ptr": "float"}}}],
                          "type": {"ptr": "int"}, "instrs": [
        {"op": "const", "dest": "a", "type": "float", "value": v} for v in (
            -0.0, 1e300, 5e-324, float("inf"), float("-inf"), float("nan"))] + [
        {"op": "x", "dest": "d", "type": {"ptr": {"a": "b", "c": "d"}}},
        {"op": "y", "type": {"ptr": {}}, "value": [1, 2.5, "c"]}]}]}
    for sort_keys in (True, False):
        assert program_json(odd, sort_keys) == json.dumps(odd, indent=2, sort_keys=sort_keys)


@pytest.mark.parametrize("name", ["core/fizz-buzz", "mixed/cholesky"])
def test_bril2json_of_a_short_program_imports_neither_click_nor_re(name):
    # Every `bril2json < p.bril | brili` pipeline starts it: click's import was
    # half of a 50 ms run, `re`'s (json's, for a float or a pointer type) 7-10 ms.
    # (an editable install's finder imports re as the interpreter starts: forgotten
    # here, so that an import of it by bril2json shows)
    code = ("import sys\n"
            "for m in [m for m in sys.modules if m == 're' or m.startswith('re.')]:\n"
            "    del sys.modules[m]\n"
            "before = set(sys.modules)\n"
            "from bril.cli import bril2json\n"
            "sys.argv = ['bril2json']\n"
            "try:\n    bril2json.main()\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('click', 're', 'json', 'lark') "
            "if m in set(sys.modules) - before), file=sys.stderr)\n")
    text = (CONFORMANCE / "benchmarks" / f"{name}.bril").read_bytes()
    proc = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, timeout=120,
                          input=text)
    assert proc.stderr == b"[]\n" and json.loads(proc.stdout) == parse_program(text)


def test_parser_is_built_once(monkeypatch):
    parse_program("@main {}")
    import lark

    def no_rebuild(*args, **kwargs):
        raise AssertionError("the grammar was rebuilt")

    monkeypatch.setattr(lark, "Lark", no_rebuild)
    assert parse_program("@main { v: int = const 1; }")["functions"][0]["name"] == "main"


# --- Printing --------------------------------------------------------------------------

def test_print_ignores_unknown_fields_and_positions():
    prog = {"functions": [{"name": "main", "pos": {"row": 1, "col": 1}, "extra": [1],
                           "instrs": [{"op": "nop", "pos": {"row": 2, "col": 3}, "trace": 7},
                                      {"label": "l", "pos": {"row": 3, "col": 1}}]}],
            "meta": "x"}
    assert format_program(prog) == "@main {\n  nop;\n.l:\n}\n"


def test_print_types_values_and_operands():
    prog = {"functions": [{
        "name": "f", "args": [{"name": "p", "type": {"ptr": {"ptr": "char"}}}],
        "type": "float", "instrs": [
            {"op": "const", "dest": "a", "type": "float", "value": 1e16},
            {"op": "const", "dest": "b", "type": "float", "value": 4},
            {"op": "const", "dest": "c", "type": "bool", "value": False},
            {"op": "const", "dest": "d", "type": "char", "value": "\t"},
            {"op": "const", "dest": "e", "value": 5},
            {"op": "call", "dest": "r", "type": "int", "funcs": ["g"], "args": ["x"]},
            {"op": "phi", "dest": "y", "type": "int", "args": ["a", "b"],
             "labels": ["l1", "l2"]},
            {"op": "br", "args": ["c"], "labels": ["t", "f"], "funcs": []},
            {"op": "ret", "args": ["a"]}]}]}
    assert format_program(prog) == (
        "@f(p: ptr<ptr<char>>): float {\n"
        "  a: float = const 1e+16;\n"
        "  b: float = const 4;\n"
        "  c: bool = const false;\n"
        "  d: char = const '\\t';\n"
        "  e = const 5;\n"
        "  r: int = call @g x;\n"
        "  y: int = phi a b .l1 .l2;\n"
        "  br c .t .f;\n"
        "  ret a;\n"
        "}\n")


def test_print_empty_program():
    assert format_program({"functions": []}) == ""


# --- The console scripts ---------------------------------------------------------------

def run(cmd, data, *args):
    exe = shutil.which(cmd)
    assert exe, f"{cmd} is not installed (pip install -e .)"
    if isinstance(data, str):
        data = data.encode()
    return subprocess.run([exe, *args], input=data, capture_output=True, timeout=60)


def assert_one_line_error(proc, *words):
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err and proc.stdout == b""
    for word in words:
        assert word in err


def test_bril2json_command():
    path = CONFORMANCE / "test" / "parse" / "add.bril"
    proc = run("bril2json", path.read_bytes())
    assert proc.returncode == 0, proc.stderr
    # Same layout as the reference tool (sorted keys, indent 2), so byte-equal.
    assert proc.stdout == path.with_suffix(".json").read_bytes()


def test_bril2json_positions_flag():
    path = CONFORMANCE / "test" / "parse" / "positions.bril"
    proc = run("bril2json", path.read_bytes(), *args_of(path))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == json.loads(path.with_suffix(".json").read_text())


def test_bril2txt_command_pipeline():
    path = CONFORMANCE / "test" / "print" / "eight-queens.json"
    proc = run("bril2txt", path.read_bytes())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == path.with_suffix(".bril").read_bytes()
    back = run("bril2json", proc.stdout)
    assert json.loads(back.stdout) == json.loads(path.read_text())


def test_bril2txt_writes_utf8():
    prog = {"functions": [{"name": "main", "instrs": [
        {"op": "const", "dest": "c", "type": "char", "value": "λ"}]}]}
    proc = run("bril2txt", json.dumps(prog))
    assert proc.stdout.decode("utf-8") == "@main {\n  c: char = const 'λ';\n}\n"


def test_bril2json_syntax_error():
    proc = run("bril2json", "@main {\n  v: int = const 1\n}\n")
    assert_one_line_error(proc, "error: 3:1: unexpected '}'")


@pytest.mark.parametrize("cmd, data, words", [
    ("bril2json", b"", ["empty input"]),
    ("bril2json", b"@main { c: char = const '\xff'; }", ["UTF-8"]),
    ("bril2json", b"@main { v: int = const 99999999999999999999; }", ["1:24:", "64 bits"]),
    ("bril2txt", b"", ["empty input"]),
    ("bril2txt", b'{"functions": [', ["invalid JSON"]),
    ("bril2txt", b"\xff\xfe", ["UTF-8"]),
    ("bril2txt", b'{"functions": [{"name": "main", "instrs": [{"op": "frob"}]}]}',
     ["unknown opcode frob"]),
])
def test_commands_report_bad_input_on_one_line(cmd, data, words):
    assert_one_line_error(run(cmd, data), *words)


@pytest.mark.parametrize("cmd", ["bril2json", "bril2txt"])
def test_help_and_bad_option(cmd):
    proc = run(cmd, b"", "--help")
    assert proc.returncode == 0 and b"stdin" in proc.stdout
    assert_one_line_error(run(cmd, b"", "--frob"), "--frob")
