#!/usr/bin/env python3
"""Keeps README.md and docs/*.md true to the code (issue 56). Python 3 standard library only.

Usage: check_docs.py --zerotrain BUILD/zerotrain [--repo DIR] [FILE.md ...]

Checks, in README.md and docs/*.md (or the files named), one line `file:line: problem` each:
  links      every relative link names a file of the repository, and a #anchor a heading of it;
  commands   every `zerotrain CMD [SUB]` in code names a command of the binary, and every --flag
             after it is one that command's --help lists;
  keys       every configuration key in code (`run.device_memory_mb`, KEY=VALUE, a zerotrain
             command's overrides, ```json blocks) is one the configuration accepts, and
             docs/configuration.md names every key it accepts;
  paths      every repository path in code (scripts/..., configs/..., src/..., tests/..., bench/...,
             fuzz/..., docs/..., .ci/...) exists, unless .gitignore names it (an output);
  notes      every Note [name] cited is a Note of the code, and one cited `in path` is in that file;
  runnable   every ```sh runnable block runs from the repository root within 60 s and exits 0,
             with build/zerotrain standing for the binary under test;
  quick start  README's quick-start block runs scripts that exist, and .ci/run runs its test command.
  choices    docs/configuration.md's row of a key that takes one of a list of values (the binary's
             error lists them, as run.comm_backend's from comm's one list) names every value.

Where the keys come from (Note [docs keys]): the binary itself. Config sections check their keys
first (Section::allow in src/config/json_check.cpp), and an unknown key's error lists the keys a
section allows, so `zerotrain estimate --config configs/mnist_mlp.json --world 1 SECTION=<object>`
with an object holding one unknown key enumerates every section recursively, exactly as the build
parses them: no list to keep beside the code. scheduler.params is checked by the scheduler per type
(its errors name no list), so a key there is asked of the binary for each scheduler type, and the
names docs/configuration.md must list are read from src/optim/schedule.cpp.

```json blocks are marked: `json config` (a whole configuration: `estimate` must accept it, at
world=N where the info string says so), `json keys` (a fragment: each key must be accepted) or
`json deepspeed` (DeepSpeed's, not checked); an unmarked json block is a problem. Blocks marked
`deepspeed` and python blocks are foreign: their keys and commands are not checked.
"""
import argparse
import concurrent.futures
import fnmatch
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import urllib.parse

PROBE = "__zt_docs_probe__"
PATH_ROOTS = ("scripts", "configs", "src", "tests", "bench", "fuzz", "docs", ".ci", "cmake", "examples")
FILE_EXTS = {"json", "jsonl", "md", "safetensors", "bin", "cpp", "h", "hpp", "cu", "cuh", "py", "sh", "png", "txt",
             "gz", "xz", "tar", "swap", "lock", "js", "csv", "log", "cmake", "so", "rst"}
PLACEHOLDER_KEYS = {"key", "KEY"}
NOTE_DIRS = ("src", "tests", "bench", "scripts", "fuzz", "cmake", "examples")
NOTE_FILES = ("CMakeLists.txt",)  # the top folder's own files that hold Notes


class Problems:
    def __init__(self):
        self.items = []

    def add(self, where, msg):
        self.items.append(f"{where}: {msg}")


# ---- markdown ----------------------------------------------------------------------------------

class Doc:
    """A markdown file split into fenced blocks and text, with line numbers."""

    FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*(.*)$")

    def __init__(self, path, rel):
        self.path, self.rel = path, rel
        with open(path, encoding="utf-8") as f:
            self.lines = f.read().split("\n")
        self.blocks = []  # (first line number of the content, info string, text)
        self.text_lines = []  # (line number, line) outside fenced blocks
        i = 0
        while i < len(self.lines):
            m = self.FENCE.match(self.lines[i])
            if m:
                fence, info, start = m.group(2), m.group(3).strip(), i + 1
                j = start
                while j < len(self.lines) and not self.lines[j].strip().startswith(fence):
                    j += 1
                self.blocks.append((start + 1, info, "\n".join(self.lines[start:j])))
                i = j + 1
                continue
            self.text_lines.append((i + 1, self.lines[i]))
            i += 1

    def where(self, line):
        return f"{self.rel}:{line}"

    def paragraphs(self):
        """Runs of consecutive non-blank text lines: (first line, text joined by newlines)."""
        out, cur, first = [], [], None
        prev = None
        for n, line in self.text_lines:
            if not line.strip() or (prev is not None and n != prev + 1):
                if cur:
                    out.append((first, "\n".join(cur)))
                cur, first = [], None
            if line.strip():
                if not cur:
                    first = n
                cur.append(line)
            prev = n
        if cur:
            out.append((first, "\n".join(cur)))
        return out

    def code_spans(self):
        """Inline code spans: (line number, content with newlines as spaces)."""
        spans = []
        for first, para in self.paragraphs():
            for m in re.finditer(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", para, re.S):
                line = first + para.count("\n", 0, m.start())
                spans.append((line, m.group(2).replace("\n", " ").strip()))
        return spans

    def text_without_code(self):
        """Paragraphs with code spans replaced by CODE (for links), with their first line."""
        out = []
        for first, para in self.paragraphs():
            out.append((first, re.sub(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", "CODE", para, flags=re.S)))
        return out

    def headings(self):
        return [(n, m.group(2)) for n, line in self.text_lines if (m := re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line))]


def slug(heading):
    """GitHub's anchor of a heading."""
    h = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    h = h.replace("`", "").strip().lower()
    h = re.sub(r"[^\w\- ]", "", h)
    return h.replace(" ", "-")


def anchors_of(path):
    seen, out = {}, set()
    with open(path, encoding="utf-8") as f:
        text = f.read()
    in_fence = False
    for line in text.split("\n"):
        if re.match(r"^\s*(```|~~~)", line):
            in_fence = not in_fence
            continue
        m = None if in_fence else re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if m:
            s = slug(m.group(2))
            k = seen.get(s, 0)
            out.add(s if k == 0 else f"{s}-{k}")
            seen[s] = k + 1
    return out


# ---- the binary ---------------------------------------------------------------------------------

class Binary:
    def __init__(self, path, repo):
        self.path, self.repo = path, repo
        self.base = os.path.join(repo, "configs", "mnist_mlp.json")
        self.helps = {}

    def run(self, args, timeout=60):
        r = subprocess.run([self.path] + args, cwd=self.repo, capture_output=True, text=True, timeout=timeout)
        return r.returncode, r.stdout, r.stderr

    def help(self, words):
        """(flags, subcommands) of `zerotrain WORDS --help`, or None where it is no command."""
        key = tuple(words)
        if key not in self.helps:
            rc, out, _ = self.run(list(words) + ["--help"])
            if rc != 0:
                self.helps[key] = None
            else:
                flags, subs, section = set(), [], None
                for line in out.split("\n"):
                    if re.match(r"^\S.*:$", line):
                        section = line[:-1]
                        continue
                    m = re.match(r"^\s+(\S+)", line)
                    if not m:
                        continue
                    if section == "Options":
                        flags.update(n for n in m.group(1).split(",") if n.startswith("-"))
                    elif section == "Subcommands" and (s := re.match(r"^  ([a-z][\w-]*)\s{2,}", line)):
                        subs.append(s.group(1))
                self.helps[key] = (flags, subs)
        return self.helps[key]

    def estimate(self, overrides, config=None, world=1):
        return self.run(["estimate", "--config", config or self.base, "--world", str(world)] + overrides)


class Keys:
    """The configuration's keys, asked of the binary (Note [docs keys] in this file's docstring)."""

    def __init__(self, binary):
        self.bin = binary
        self.kind = {}  # path -> "leaf" | "section" | "scheduler_params"
        self.problems = []
        self.scheduler_types = []
        self.scheduler_cache = {}
        self._enumerate()

    def _probe(self, key):
        rc, _, err = self.bin.estimate([f'{key}={{"{PROBE}":1}}'] if key else [f"{PROBE}=1"])
        return rc, err.strip()

    def _children(self, key, err):
        m = re.search(r"unknown key '" + re.escape((key + "." if key else "") + PROBE) +
                      r"' \(allowed(?: in '[^']*')?(?: for model\.type \S+)?: ([^)]*)\)", err)
        return [c.strip() for c in m.group(1).split(",")] if m else None

    def _enumerate(self):
        rc, err = self._probe("")
        top = self._children("", err)
        if not top:
            raise SystemExit(f"check_docs: cannot list the configuration's keys: {self.bin.path} said: {err[:300]}")
        pending = top
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(4, 2 * (os.cpu_count() or 2))) as pool:
            while pending:
                results = list(pool.map(lambda k: (k, self._probe(k)), pending))
                pending = []
                for key, (rc, err) in results:
                    kids = self._children(key, err)
                    if kids is not None:
                        self.kind[key] = "section"
                        pending += [f"{key}.{c}" for c in kids]
                    elif re.search(r"\[scheduler\] unknown key '" + PROBE + "'", err):
                        self.kind[key] = "scheduler_params"
                    elif f"'{key}'" in err or rc == 0:
                        self.kind[key] = "leaf"
                    else:
                        self.problems.append(f"cannot tell what the key {key} is: {err[:200]}")
        # The model section's keys are its families' (Note [model registry]): each type's, asked in turn.
        _, _, err = self.bin.estimate([f'model.type={{"{PROBE}":1}}'])
        m = re.search(r"must be one of (.*?), got", err)
        types = [t.strip() for t in m.group(1).split(",")] if m else []
        if not types:
            self.problems.append(f"cannot list the model types: {err[:200]}")
        for t in types:
            _, _, err = self.bin.estimate([f'model={json.dumps({"type": t, PROBE: 1})}'])
            kids = self._children("model", err)
            if kids is None:
                self.problems.append(f"cannot list the keys of model.type {t}: {err[:200]}")
            for c in kids or []:
                self.kind.setdefault(f"model.{c}", "leaf")
        rc, _, err = self.bin.estimate([f'scheduler.type={{"{PROBE}":1}}'])
        m = re.search(r"must be one of (.*?), got", err)
        self.scheduler_types = [t.strip() for t in m.group(1).split(",")] if m else []
        if not self.scheduler_types:
            self.problems.append(f"cannot list the scheduler types: {err[:200]}")

    def leaves(self):
        return sorted(k for k, v in self.kind.items() if v == "leaf")

    def sections(self):
        return [k for k, v in self.kind.items() if v != "leaf"]

    def scheduler_accepts(self, name):
        """The scheduler types that accept params.NAME."""
        if name not in self.scheduler_cache:
            ok = []
            for t in self.scheduler_types:
                cfg = json.dumps({"type": t, "params": {name: {PROBE: 1}}})
                _, _, err = self.bin.estimate([f"scheduler={cfg}"])
                if "[scheduler]" in err and not re.search(r"unknown key '" + re.escape(name) + "' for ", err):
                    ok.append(t)
            self.scheduler_cache[name] = ok
        return self.scheduler_cache[name]

    def resolve(self, token):
        """The full path a dotted token names, or None where it is no configuration key at all."""
        first = token.split(".")[0]
        if first in self.kind:
            return token
        owners = [s for s in self.sections() if s.split(".")[-1] == first]
        if len(owners) == 1:
            return owners[0].rsplit(".", 1)[0] + "." + token if "." in owners[0] else token
        return None

    def check(self, path):
        """None where `path` is accepted, else what is wrong."""
        if path in self.kind:
            return None
        if path.startswith("scheduler.params."):
            name = path[len("scheduler.params."):]
            if "." not in name and self.scheduler_accepts(name):
                return None
            return f"no scheduler type takes params key '{name}' (types: {', '.join(self.scheduler_types)})"
        parent = path.rsplit(".", 1)[0] if "." in path else ""
        while parent and parent not in self.kind:
            parent = parent.rsplit(".", 1)[0] if "." in parent else ""
        if parent and self.kind[parent] == "leaf":
            return f"'{parent}' is a value, not a section"
        section = path.rsplit(".", 1)[0] if "." in path else ""
        near = [k for k in self.kind if (k.rsplit(".", 1)[0] if "." in k else "") == section]
        return "not a configuration key" + (f" (that section has: {', '.join(sorted(k.split('.')[-1] for k in near))})"
                                            if near and len(near) < 40 else "")


def scheduler_param_names(repo):
    """The params keys src/optim/schedule.cpp reads, for configuration.md's completeness."""
    with open(os.path.join(repo, "src", "optim", "schedule.cpp"), encoding="utf-8") as f:
        src = f.read()
    names = set(re.findall(r"\bp\.\w+\(\"(\w+)\"", src))
    for lst in re.findall(r"(?:Params p\(\"\w+\", params,|keys =)\s*\{([^}]*)\}", src):
        names.update(re.findall(r"\"(\w+)\"", lst))
    names.update(re.findall(r"(?:known|keys)\.push_back\(\"(\w+)\"\)", src))
    return names


# ---- the checks ---------------------------------------------------------------------------------

def code_texts(doc):
    """(line, text, kind) of every piece of code: inline spans, and each fenced block but foreign ones."""
    out = [(n, t, "span") for n, t in doc.code_spans()]
    for start, info, text in doc.blocks:
        words = info.split()
        lang = words[0] if words else ""
        if "deepspeed" in words or lang in ("python", "py", "json"):
            continue
        # A line ending in a backslash continues on the next.
        lines = text.split("\n")
        i = 0
        while i < len(lines):
            first, joined = i, lines[i]
            while joined.endswith("\\") and i + 1 < len(lines):
                i += 1
                joined = joined[:-1] + " " + lines[i]
            out.append((start + first, joined, lang if lang in SHELLS else "text"))
            i += 1
    return out


SHELLS = ("sh", "bash", "console", "shell")


def strip_word(w):
    return w.strip("[](),;'\"`").rstrip(".:")


COMMAND_AT = re.compile(r"(?:^|(?<=[\s'\"(/]))zerotrain(?=\s+\S)")
END_WORDS = {"|", "||", "&&", ";", ">", ">>", "2>", "2>&1", "<"}


def check_commands(doc, binary, keys, probs):
    for line, text, kind in code_texts(doc):
        if kind == "text":  # a block of prose or a layout, not commands
            continue
        for m in COMMAND_AT.finditer(text):
            words = text[m.end():].split()
            rest = []
            for w in words:
                if w in END_WORDS or w.startswith("#") or w.startswith(">") or w.startswith("2>"):
                    break
                rest.append(w)
            if not rest:
                continue
            where = doc.where(line)
            top = binary.help([])
            head = strip_word(rest[0])
            if head.isupper() or head.startswith("<"):  # a placeholder: `zerotrain CMD --help`
                continue
            if head.startswith("-"):
                paths, args = [[]], rest
            else:
                names = head.split("|")
                bad = [n for n in names if n not in top[1]]
                if bad:
                    probs.add(where, f"`zerotrain {head}`: no such command ({', '.join(bad)}); "
                                     f"the commands: {', '.join(top[1])}")
                    continue
                paths, args = [[n] for n in names], rest[1:]
                subs = binary.help(paths[0])[1]
                if subs and args and not strip_word(args[0]).startswith("-"):
                    sub = strip_word(args[0]).split("|")
                    bad = [s for s in sub if s not in subs]
                    if bad:
                        probs.add(where, f"`zerotrain {head} {strip_word(args[0])}`: no such subcommand "
                                         f"({', '.join(bad)}); {head} has: {', '.join(subs)}")
                        continue
                    paths, args = [p + [s] for p in paths for s in sub], args[1:]
            for w in args:
                flag = strip_word(w).split("=")[0]
                if re.fullmatch(r"--[A-Za-z][\w-]*", flag):
                    for p in paths:
                        h = binary.help(p)
                        if h is not None and flag not in h[0]:
                            probs.add(where, f"`zerotrain {' '.join(p)}` has no option {flag} "
                                             f"(its options: {', '.join(sorted(h[0]))})")
                    continue
                if paths != [[]] and paths[0] and paths[0][0] in OVERRIDES_TAKEN:
                    km = re.fullmatch(r"([A-Za-z_][\w]*(?:\.[\w]+)*)=.*", strip_word(w))
                    k = km.group(1) if km else ""
                    # A dotted key of a known section is check_keys' (it sees every code token).
                    if k and k not in PLACEHOLDER_KEYS and ("." not in k or keys.resolve(k) is None):
                        why = keys.check(k)
                        if why:
                            probs.add(where, f"override {k}: {why}")


OVERRIDES_TAKEN = {"train", "eval", "estimate", "import", "generate"}
DOTTED = re.compile(r"(?<![\w./$<-])([a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*)+)(?![\w/(])")


def check_keys(doc, keys, probs):
    for line, text, _ in code_texts(doc):
        for m in DOTTED.finditer(text):
            token = m.group(1)
            if token.split(".")[-1] in FILE_EXTS:
                continue
            path = keys.resolve(token)
            if path is None:
                continue
            why = keys.check(path)
            if why:
                probs.add(doc.where(line), f"`{token}`: {why}")
    for start, info, text in doc.blocks:
        words = info.split()
        if not words or words[0] != "json":
            continue
        mark = words[1] if len(words) > 1 else ""
        if mark == "deepspeed":
            continue
        if mark not in ("config", "keys"):
            probs.add(doc.where(start - 1), "a json block must say what it is: ```json config, ```json keys "
                                            "or ```json deepspeed")
            continue
        try:
            value = json.loads(text)
        except ValueError as e:
            probs.add(doc.where(start - 1), f"json block does not parse: {e}")
            continue

        def walk(obj, prefix):
            for k, v in obj.items():
                path = f"{prefix}{k}"
                why = keys.check(path)
                if why:
                    probs.add(doc.where(start - 1), f"json key {path}: {why}")
                elif isinstance(v, dict) and keys.kind.get(path) == "section":
                    walk(v, path + ".")

        if isinstance(value, dict):
            walk(value, "")
        if mark == "config":
            world = next((w.split("=", 1)[1] for w in words if w.startswith("world=")), "1")
            with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
                f.write(text)
            try:
                rc, _, err = keys.bin.estimate([], config=f.name, world=world)
            finally:
                os.unlink(f.name)
            if rc != 0:
                probs.add(doc.where(start - 1), f"zerotrain estimate --world {world} refuses this configuration: "
                                                f"{err.strip()[:300]}")


def gitignored(repo, rel):
    try:
        with open(os.path.join(repo, ".gitignore"), encoding="utf-8") as f:
            pats = [p.strip() for p in f if p.strip() and not p.startswith("#")]
    except OSError:
        return False
    parts = rel.strip("/").split("/")
    for p in pats:
        anchored, pat = p.startswith("/"), p.strip("/")
        for i in range(len(parts)):
            cand = "/".join(parts[: i + 1])
            if fnmatch.fnmatch(cand, pat) or (not anchored and fnmatch.fnmatch(parts[i], pat)):
                return True
    return False


PATH_TOKEN = re.compile(r"(?<![\w./-])((?:" + "|".join(re.escape(r) for r in PATH_ROOTS) + r")/[\w./+-]*)")


def check_paths(doc, repo, probs):
    for line, text, _ in code_texts(doc):
        for m in PATH_TOKEN.finditer(text):
            rel = m.group(1).rstrip(".,:;")
            if "..." in rel:
                continue
            if text[m.end():m.end() + 1] in ("<", "*", "{"):  # a pattern (`src/ops/<area>.cpp`): its folder
                rel = rel.rsplit("/", 1)[0]
            if not os.path.exists(os.path.join(repo, rel)) and not gitignored(repo, rel):
                probs.add(doc.where(line), f"`{rel}` does not exist")


def check_links(doc, repo, probs):
    here = os.path.dirname(doc.path)
    for first, para in doc.text_without_code():
        for m in re.finditer(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", para):
            target = m.group(1)
            line = first + para.count("\n", 0, m.start())
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue
            path, _, frag = target.partition("#")
            full = os.path.normpath(os.path.join(here, urllib.parse.unquote(path))) if path else doc.path
            if os.path.relpath(full, repo).startswith(".."):
                probs.add(doc.where(line), f"link {target} leaves the repository")
                continue
            if not os.path.exists(full):
                probs.add(doc.where(line), f"link {target}: no such file")
                continue
            if frag and full.endswith(".md") and frag not in anchors_of(full):
                probs.add(doc.where(line), f"link {target}: {os.path.relpath(full, repo)} has no heading #{frag}")


def note_index(repo):
    notes = {}
    walks = [[(repo, [], list(NOTE_FILES))]] + [os.walk(os.path.join(repo, d)) for d in NOTE_DIRS]
    for walk in walks:
        for root, _, files in walk:
            for name in files:
                p = os.path.join(root, name)
                if os.path.abspath(p) == os.path.abspath(__file__):  # this file's own examples
                    continue
                try:
                    with open(p, encoding="utf-8") as f:
                        text = f.read()
                except (UnicodeDecodeError, OSError):
                    continue
                rel = os.path.relpath(p, repo)
                for n in set(re.findall(r"Note \[([^\]\n]+)\]", text)):
                    notes.setdefault(n, [set(), set()])[0].add(rel)
                for n in set(re.findall(r"Note \[([^\]\n]+)\]:", text)):
                    notes[n][1].add(rel)
    # Where a Note is: the files that write it out (`Note [name]: ...`), else every file citing it.
    return {n: (defined or cited) for n, (cited, defined) in notes.items()}


def check_notes(doc, repo, notes, probs):
    text = "\n".join(doc.lines)
    for m in re.finditer(r"Note \[([^\]\n]+)\](\s+in\s+`([^`]+)`)?", text):
        line = text.count("\n", 0, m.start()) + 1
        name, path = m.group(1), m.group(3)
        if name not in notes:
            probs.add(doc.where(line), f"Note [{name}] is no Note of the code")
        elif path and path.rstrip("/") not in notes[name]:
            probs.add(doc.where(line), f"Note [{name}] is not in {path} (it is in {', '.join(sorted(notes[name]))})")


def check_runnable(doc, repo, binary_path, probs):
    for start, info, text in doc.blocks:
        words = info.split()
        if len(words) < 2 or words[0] not in ("sh", "bash") or "runnable" not in words[1:]:
            continue
        script = re.sub(r"(?<![\w./-])build/zerotrain(?![\w/-])", shlex.quote(binary_path), text)
        try:
            r = subprocess.run(["bash", "-c", "set -euo pipefail\n" + script], cwd=repo, capture_output=True,
                               text=True, timeout=60)
            if r.returncode != 0:
                tail = " | ".join((r.stdout + r.stderr).strip().split("\n")[-3:]) or "(no output)"
                probs.add(doc.where(start - 1), f"runnable block exits {r.returncode}: {tail}")
        except subprocess.TimeoutExpired:
            probs.add(doc.where(start - 1), "runnable block ran past 60 s")


def check_quick_start(doc, repo, probs):
    lines = doc.lines
    heading = next((i for i, l in enumerate(lines) if re.match(r"^#+\s+Quick start\s*$", l)), None)
    if heading is None:
        probs.add(doc.rel, "no 'Quick start' heading")
        return
    block = next((b for b in doc.blocks if b[0] > heading + 1), None)
    if block is None:
        probs.add(doc.where(heading + 1), "no code block after 'Quick start'")
        return
    commands = [l.split("#")[0].split() for l in block[2].split("\n") if l.strip() and not l.startswith("#")]
    test = None
    for words in commands:
        script = words[0]
        p = os.path.join(repo, script)
        if not (os.path.isfile(p) and os.access(p, os.X_OK)):
            probs.add(doc.where(block[0]), f"quick start runs {script}, which is not an executable file")
        if script.endswith("test.sh"):
            test = " ".join(words)
    ci = os.path.join(repo, ".ci", "run")
    with open(ci, encoding="utf-8") as f:
        ci_text = f.read()
    if test is None:
        probs.add(doc.where(block[0]), "the quick start names no test command (scripts/test.sh)")
    elif not re.search(r"(?m)^\s*(exec\s+)?" + re.escape(test) + r"\s*$", ci_text):
        probs.add(doc.where(block[0]), f".ci/run does not run the README's test command `{test}`")


def check_completeness(doc, keys, repo, probs):
    """docs/configuration.md names every key the configuration accepts."""
    mine = set()
    for _, text, _ in code_texts(doc):
        for m in DOTTED.finditer(text):
            if (p := keys.resolve(m.group(1))) is not None:
                mine.add(p)
    for _, text in doc.code_spans():
        if text in keys.kind:
            mine.add(text)
    for k in keys.leaves():
        if k not in mine:
            probs.add(doc.rel, f"the configuration accepts {k}, which this page does not name")
    for name in sorted(scheduler_param_names(repo)):
        if f"scheduler.params.{name}" not in mine:
            probs.add(doc.rel, f"the scheduler takes params.{name}, which this page does not name "
                               f"(as scheduler.params.{name})")


def choices_of(keys, key):
    """The values a choice key takes, as the binary's error lists them (None where `key` is no choice)."""
    _, _, err = keys.bin.estimate([f"{key}={PROBE}"])
    m = re.search(r"'" + re.escape(key) + r"' must be one of (.*?)(?: \(any case\))?, got", err)
    return [c.strip() for c in m.group(1).split(",")] if m else None


def check_choices(doc, keys, probs):
    """A row of docs/configuration.md's tables names, as `code`, every value its choice keys take
    (run.comm_backend's are comm's list of backends, zt/comm/backends.h)."""
    rows = []
    for n, line in enumerate(doc.lines, 1):
        cells = line.split("|")
        if line.startswith("|") and len(cells) > 3:
            named = [k for k in re.findall(r"`([^`]+)`", cells[1]) if k in keys.kind and keys.kind[k] == "leaf"]
            if named:
                rows.append((n, line, named))
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(4, 2 * (os.cpu_count() or 2))) as pool:
        asked = {k: c for k, c in pool.map(lambda k: (k, choices_of(keys, k)), {k for _, _, ks in rows for k in ks})}
    for n, line, named in rows:
        spans = set(re.findall(r"`([^`]+)`", line))
        for key in named:
            missing = [c for c in asked[key] or [] if c not in spans]
            if missing:
                probs.add(f"{doc.rel}:{n}", f"{key} also takes {', '.join(missing)}, which this row does not name")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--zerotrain", required=True, help="the zerotrain binary to check against")
    ap.add_argument("--repo", default=os.path.normpath(os.path.join(here, "..", "..")))
    ap.add_argument("files", nargs="*", help="markdown files (default: README.md and docs/*.md)")
    a = ap.parse_args()
    repo = os.path.abspath(a.repo)
    binary = os.path.abspath(a.zerotrain)
    if not os.access(binary, os.X_OK):
        raise SystemExit(f"check_docs: {binary} is not an executable")
    files = a.files or (["README.md"] + sorted(os.path.join("docs", f) for f in os.listdir(os.path.join(repo, "docs"))
                                               if f.endswith(".md")))
    bin_ = Binary(binary, repo)
    keys = Keys(bin_)
    notes = note_index(repo)
    probs = Problems()
    for p in keys.problems:
        probs.add("(config)", p)
    docs = []
    for f in files:
        full = os.path.join(repo, f)
        docs.append(Doc(full, os.path.relpath(full, repo)))
    for d in docs:
        check_links(d, repo, probs)
        check_commands(d, bin_, keys, probs)
        check_keys(d, keys, probs)
        check_paths(d, repo, probs)
        check_notes(d, repo, notes, probs)
        check_runnable(d, repo, binary, probs)
        if d.rel == "README.md":
            check_quick_start(d, repo, probs)
        if d.rel == os.path.join("docs", "configuration.md"):
            check_completeness(d, keys, repo, probs)
            check_choices(d, keys, probs)
    def order(item):
        m = re.match(r"^(.*?):(\d+): ", item)
        return (m.group(1), int(m.group(2))) if m else (item.split(":")[0], 0)

    for line in sorted(probs.items, key=order):
        print(line)
    print(f"check_docs: {len(docs)} files, {len(keys.kind)} configuration keys and sections, "
          f"{len(probs.items)} problem(s)")
    return 1 if probs.items else 0


if __name__ == "__main__":
    sys.exit(main())
