"""Read an MSCCL algorithm XML exactly as the runtimes' hand-written tokenizer does.

The rules mirror msccl_parser.cc (RCCL src/misc/msccl, msccl-executor-nccl src/misc/msccl):
whitespace between elements is ' ', '\\n', '\\r' only; a name ends at ' ', '>', '/', '\\n',
'\\r'; attributes are separated by ONE space each (an extra space makes an empty attribute);
values are in double quotes (a value may open with ' but always ends at "); an element ends on
its own line; at most 16 attributes are kept, the rest are dropped; `<!-- -->` comments are
skipped; unknown elements are skipped with their subtree. Errors use the runtime's own WARN
wording, prefixed by the line, so a broken file reads the same here and in the NCCL log.
Integers are read as C `strtol(s, NULL, 0)` would, and anything but plain decimal is refused,
because the runtime silently misreads it (a leading 0 is octal: "010" is 8, "09" is 0).
Hostile input is bounded before anything grows: a value longer than MAX_STR_LEN (the runtime's
buffer, which it would overflow) and an integer outside a C int are refused naming the
attribute and line; nesting and comments are read with a loop, not recursion, so any depth
costs only memory proportional to the file.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal, NoReturn

from optcc.errors import OptccError
from optcc.lowering.msccl_runtime import MAX_ATTR_COUNT, MAX_STR_LEN, MAX_SUBS

INT_MIN, INT_MAX = -(2 ** 31), 2 ** 31 - 1     # the runtime stores integer attributes in a C int
# optcc's bounds on one verification, checked as elements are read (the executor keeps one
# vector clock per thread block for every step that sends or publishes)
MAX_FILE_STEPS = 1 << 20            # <step> elements in the file
MAX_CLOCK_WORK = 1 << 28            # thread blocks x steps in the file

# The elements the runtime descends into; anything else is skipped with its subtree.
_HANDLED = {None: "algo", "algo": "gpu", "gpu": "tb", "tb": "step"}
_DECIMAL = re.compile(r"-?(0|[1-9][0-9]*)\Z")
_DELIMS = re.compile(r"[= >/\n\r]")       # what ends a name (and '=' which starts a value)
_BLANKS = re.compile(r"[ \n\r]*")          # whitespace between elements
# The common layout (what every tool writes): one line, single spaces, "-quoted values. Such an
# element reads the same by this pattern as by the runtime's loop; anything else takes the loop.
_ELEMENT = re.compile(r'<([A-Za-z_][A-Za-z0-9_]*)((?: [A-Za-z_][A-Za-z0-9_]*="[^"\n\r]*")*)(/?)>')
_ATTR = re.compile(r' ([A-Za-z_][A-Za-z0-9_]*)="([^"\n\r]*)"')


@dataclass
class Node:
    name: str
    attrs: dict[str, str]
    line: int
    children: list[Node] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)      # attributes past the 16th

    def where(self, attr: str | None = None) -> str:
        return f"line {self.line}" + (f" <{self.name}> {attr}" if attr else f" <{self.name}>")

    def text(self, attr: str) -> str:
        if attr not in self.attrs:
            raise OptccError(self.where(attr), f"Attribute {attr} of node {self.name} not found"
                             + (f" (dropped: the runtime keeps only the first {MAX_ATTR_COUNT} attributes)"
                                if attr in self.dropped else ""))
        return self.attrs[attr]

    def int(self, attr: str) -> int:
        raw = self.attrs.get(attr)
        if raw is not None and len(raw) <= 9 and raw.isascii() and raw.isdigit() and (raw[0] != "0" or raw == "0"):
            return int(raw)                             # the common case: small plain decimal
        if raw == "-1":
            return -1
        raw = self.text(attr)
        if not _DECIMAL.match(raw):
            read = c_strtol(raw)
            why = ("a zero-padded integer" if re.fullmatch(r"-?0[0-9]+", raw) else "not a plain decimal integer")
            raise OptccError(self.where(attr), f"{why} {raw[:40]!r}: the runtime reads it with strtol(s, NULL, 0) "
                                               f"as {read}; write plain decimal without leading zeros")
        value = int(raw) if len(raw) <= 12 else INT_MAX + 1
        if not INT_MIN <= value <= INT_MAX:
            raise OptccError(self.where(attr), f"{raw[:40]!r}{'...' if len(raw) > 40 else ''} ({len(raw)} characters) "
                                               f"is outside a C int [{INT_MIN}, {INT_MAX}], which the runtime stores "
                                               "it in")
        return value


def c_strtol(s: str) -> int:
    """What C strtol(s, NULL, 0) returns (base from the prefix, stops at the first bad digit)."""
    m = re.match(r"\s*([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)", s)
    if not m:
        return 0
    sign = -1 if m.group(1) == "-" else 1
    digits = m.group(2)
    if digits[:2].lower() == "0x":
        return sign * int(digits, 16)
    if digits.startswith("0"):
        return sign * int(digits, 8) if len(digits) > 1 else 0
    if len(digits) > 19:                       # strtol saturates at LONG_MAX / LONG_MIN
        return 2 ** 63 - 1 if sign > 0 else -(2 ** 63)
    return sign * int(digits)


class _Reader:
    top: list[Node]                     # set by parse_xml
    counts: dict[str, int]

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.line = 1
        self.nodes = 0

    def fail(self, message: str, line: int | None = None) -> NoReturn:
        raise OptccError(f"line {self.line if line is None else line}", message)

    def getc(self) -> str:
        if self.pos >= len(self.text):
            self.fail("XML Parse : Unexpected EOF")
        c = self.text[self.pos]
        self.pos += 1
        if c == "\n":
            self.line += 1
        return c

    def value(self, name: str) -> tuple[str, str]:
        c = self.getc()
        if c not in "\"'":
            self.fail("XML Parse : Expected (double) quote.")
        end = self.text.find('"', self.pos)
        if end < 0:
            self.pos = len(self.text)
            self.fail("XML Parse : Unexpected EOF")
        value = self.text[self.pos:end]
        if len(value) >= MAX_STR_LEN:
            raise OptccError(f"line {self.line} <{self.element}> {name}",
                             f"a value of {len(value)} characters ({value[:40]!r}...): the runtime keeps a value in "
                             f"a buffer of {MAX_STR_LEN} characters and would overflow it")
        self.line += value.count("\n")
        self.pos = end + 1
        return value, self.getc()

    def token(self, want_value: bool) -> tuple[str, str | None, str]:
        """(name, value or None, the character that ended it); the runtime's loop, by search."""
        start = self.pos
        m = _DELIMS.search(self.text, start)
        end = m.start() if m else len(self.text)
        name = self.text[start:end]
        if len(name) >= MAX_STR_LEN - 1 and not (len(name) == MAX_STR_LEN - 1 and m and m.group() == "="):
            self.pos = start + MAX_STR_LEN - 1
            self.fail(f"Error : name {name[:MAX_STR_LEN - 1]} too long (max {MAX_STR_LEN})")
        if m is None:
            self.pos = len(self.text)
            self.fail("XML Parse : Unexpected EOF")
        c = m.group()
        self.pos = end + 1
        if c == "\n":
            self.line += 1
        if c == "=":
            if not want_value:
                self.fail(f"XML Parse : Unexpected value with name {name}")
            value, last = self.value(name)
            return name, value, last
        return name, None, c

    def node(self) -> tuple[str, Node] | None:
        """One element: ('open'|'single'|'close', Node) or None at the end of the file."""
        while True:
            got = self._node()
            if got != "comment":
                return got

    def _node(self) -> tuple[str, Node] | Literal["comment"] | None:
        blanks = _BLANKS.match(self.text, self.pos)
        assert blanks is not None                   # [ \n\r]* matches everywhere
        blank = blanks.end()
        self.line += self.text.count("\n", self.pos, blank)
        self.pos = blank
        if self.pos >= len(self.text):
            return None
        c = self.getc()
        if c != "<":
            self.fail(f"XML Parse error : expecting '<', got '{c}'")
        line = self.line
        fast = _ELEMENT.match(self.text, self.pos - 1)
        if fast:
            attrs = _ATTR.findall(fast.group(2))
            if len(attrs) <= MAX_ATTR_COUNT and (fast.end() - fast.start() < MAX_STR_LEN - 1 or (
                    len(fast.group(1)) < MAX_STR_LEN - 1
                    and all(len(k) < MAX_STR_LEN - 1 and len(v) < MAX_STR_LEN for k, v in attrs))):
                node = Node(fast.group(1), {}, line)
                for k, v in attrs:
                    node.attrs.setdefault(k, v)                 # the runtime finds the first match
                self.pos = fast.end()
                return ("single" if fast.group(3) else "open"), node
        name, _, c = self.token(False)
        if name.startswith("!--"):
            tail = ("..." + name[3:] + c)[-3:]
            if tail != "-->":
                end = self.text.find("-->", self.pos)
                if tail[1:] == "--" and self.text.startswith(">", self.pos):
                    end = self.pos - 2
                elif tail[2:] == "-" and self.text.startswith("->", self.pos):
                    end = self.pos - 1
                if end < 0:
                    self.pos = len(self.text)
                    self.fail("XML Parse error : unterminated comment")
                self.line += self.text.count("\n", self.pos, end + 3)
                self.pos = end + 3
            return "comment"
        if name == "" and c == "/":
            name, _, c = self.token(False)
            if c != ">":
                self.fail(f"XML Parse error : unexpected trailing {c} in closing tag {name}")
            return "close", Node(name, {}, line)
        node = Node(name, {}, line)
        self.element = name
        kept = 0
        while c == " ":
            key, value, c = self.token(True)
            if kept == MAX_ATTR_COUNT:
                node.dropped.append(key)
                continue
            kept += 1
            if value is not None and key not in node.attrs:     # the runtime finds the first match
                node.attrs[key] = value
        kind = "open"
        if c == "/":
            kind = "single"
            _, _, c = self.token(False)
        if c != ">":
            shown = {"\n": "\\n", "\r": "\\r"}.get(c, c)
            self.fail(f"XML Parse : expected >, got '{shown}' (an element and its attributes must be on one line)",
                      line)
        return kind, node

    def load(self) -> None:
        """Read every element; a loop with an explicit stack, so nesting depth costs no recursion."""
        stack: list[tuple[Node | None, str | None, bool]] = [(None, "algo", True)]
        while stack:
            head, handled, keep = stack[-1]
            got = self.node()
            if got is None:
                if head is not None:
                    self.fail(f"XML Parse : unterminated {head.name}", head.line)
                return
            kind, node = got
            if kind == "close":
                if head is None or node.name != head.name:
                    self.fail(f"XML Mismatch : {head.name if head else ''} / {node.name}", node.line)
                stack.pop()
                continue
            take = keep and node.name == handled
            if take:
                self.nodes += 1
                if node.name in ("tb", "step"):
                    self.counts[node.name] += 1
                    tbs, steps = self.counts["tb"], self.counts["step"]
                    if steps > MAX_FILE_STEPS or tbs * steps > MAX_CLOCK_WORK:
                        self.fail(f"{tbs} thread blocks and {steps} steps so far: more than optcc verifies in one "
                                  f"file (at most {MAX_FILE_STEPS} steps and thread blocks x steps <= "
                                  f"{MAX_CLOCK_WORK})", node.line)
                if head is not None:
                    head.children.append(node)
                    if len(head.children) > MAX_SUBS:
                        self.fail(f"{head.name} at line {head.line} has more than {MAX_SUBS} children "
                                  f"(MSCCL_MAX_SUBS)", node.line)
                else:
                    self.top.append(node)
            if kind == "open":
                stack.append((node, _HANDLED.get(node.name) if take else None, take))


def parse_xml(text: str) -> Node:
    """The <algo> element with its gpu/tb/step subtree (other elements dropped, as the runtime does)."""
    reader = _Reader(text)
    reader.top = []
    reader.counts = {"tb": 0, "step": 0}
    reader.load()
    if not reader.top:
        raise OptccError("line 1", "no <algo> element (the runtime's first element must be <algo>)")
    return reader.top[0]
