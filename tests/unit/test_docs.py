"""The README and docs/ hold to the repository: links resolve, shell blocks name things that
exist, and docs/configuration.md lists exactly the profile fields and model configs the code
knows. No Spark."""

import ast
import dataclasses
import os
import re
import shutil
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
README = os.path.join(ROOT, "README.md")
DOCS = os.path.join(ROOT, "docs")
CI_COMMAND = ("python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && "
              ".venv/bin/python -m pytest -q tests")


def _read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def _pages():
    return [README] + sorted(os.path.join(DOCS, name) for name in os.listdir(DOCS) if name.endswith(".md"))


FENCE = re.compile(r"^(```+|~~~+)\s*([\w+-]*)")


def _split(text):
    """(prose lines, [(language, code lines)]) of a markdown text."""
    prose, blocks, block, fence = [], [], None, None
    for line in text.split("\n"):
        match = FENCE.match(line.strip())
        if block is None and match:
            fence, block = match.group(1), (match.group(2).lower(), [])
        elif block is not None and line.strip().startswith(fence) and not line.strip().strip(fence[0]):
            blocks.append(block)
            block = None
        elif block is not None:
            block[1].append(line)
        else:
            prose.append(line)
    assert block is None, "a code block is not closed"
    return prose, blocks


def _slug(heading):
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to dashes."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(path):
    prose, _ = _split(_read(path))
    seen, anchors = {}, set()
    for line in prose:
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if match:
            slug = _slug(match.group(1))
            anchors.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
            seen[slug] = seen.get(slug, 0) + 1
    return anchors


LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _links(path):
    prose, _ = _split(_read(path))
    text = "\n".join(re.sub(r"`[^`]*`", "", line) for line in prose)  # not inside inline code
    return LINK.findall(text)


def test_readme_is_short_and_opens_with_the_two_commands():
    text = _read(README)
    lines = text.split("\n")
    assert len(lines) < 200, f"README.md has {len(lines)} lines"
    # .ci/run runs the first line naming `-m pytest`; it must stay the set-up and test command.
    first = next(line for line in lines if "-m pytest" in line)
    assert first == CI_COMMAND
    _, blocks = _split(text)
    assert blocks[0][0] == "bash" and CI_COMMAND in blocks[0][1]
    assert any("run_demo.py" in line for line in blocks[0][1])


def test_every_docs_page_opens_with_what_it_covers():
    for path in _pages()[1:]:
        lines = [line for line in _read(path).split("\n") if line.strip()]
        assert lines[0].startswith("# "), path
        assert not lines[1].startswith(("#", "```", "|", "-")), f"{path}: no opening paragraph"


@pytest.mark.parametrize("page", _pages(), ids=lambda p: os.path.relpath(p, ROOT))
def test_relative_links_resolve(page):
    problems = []
    for target in _links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        resolved = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
        if not os.path.exists(resolved):
            problems.append(f"{target}: no file {os.path.relpath(resolved, ROOT)}")
        elif anchor and resolved.endswith(".md") and anchor not in _anchors(resolved):
            problems.append(f"{target}: no heading #{anchor} in {os.path.relpath(resolved, ROOT)}")
    assert not problems, f"{os.path.relpath(page, ROOT)}: " + "; ".join(problems)


def _console_scripts():
    tree = ast.parse(_read(os.path.join(ROOT, "setup.py")))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and re.match(r"^[\w-]+ = [\w.]+:\w+$", node.value):
            yield node.value.split(" = ")[0]


SHELL_BUILTINS = {"cd", "export", "source", "echo", "bash", "sh", "cat", "ls", "mkdir", "set"}


def _command_exists(word):
    if word in SHELL_BUILTINS or word in set(_console_scripts()):
        return True
    if word.startswith(".venv/bin/"):  # the virtualenv the same block makes: this interpreter's
        return os.path.exists(os.path.join(os.path.dirname(sys.executable), word[len(".venv/bin/"):]))
    if "/" in word:
        return os.path.exists(os.path.join(ROOT, word))
    return bool(shutil.which(word) or os.path.exists(os.path.join(os.path.dirname(sys.executable), word)))


def _shell_commands(language, lines):
    """The commands of a shell block: a console block's `$ ` lines, every line of the others;
    comments dropped, `&&`, `||`, `;` and `|` split."""
    for line in lines:
        if language == "console":
            if not line.startswith("$ "):
                continue
            line = line[2:]
        line = re.sub(r"(^|\s)#.*$", "", line).strip()
        for part in re.split(r"&&|\|\||;|\|", line):
            words = part.split()
            while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):  # VAR=value command
                words.pop(0)
            if words:
                yield words


def test_shell_blocks_in_the_readme_name_files_and_commands_that_exist():
    _, blocks = _split(_read(README))
    shell = [(lang, lines) for lang, lines in blocks if lang in ("bash", "sh", "console", "shell")]
    assert shell
    problems = []
    for language, lines in shell:
        for words in _shell_commands(language, lines):
            if not _command_exists(words[0]):
                problems.append(f"command {words[0]!r}")
            for word in words[1:]:
                word = word.strip("'\"")
                # a path into the repository (its first folder is one of the repository's)
                if "/" in word and not word.startswith(("-", ".venv/")) and \
                        os.path.exists(os.path.join(ROOT, word.split("/")[0])) and \
                        not os.path.exists(os.path.join(ROOT, word)):
                    problems.append(f"path {word!r}")
    assert not problems, "README shell blocks name what does not exist: " + ", ".join(problems)


# ---- docs/configuration.md against the code ----------------------------------------------------

def _section(text, start, end=None):
    body = text.split(start, 1)[1]
    return body.split(end, 1)[0] if end else body


def _first_column(section):
    return {m.group(1) for m in re.finditer(r"^\|\s*`([\w+.-]+)`\s*\|", section, re.M)}


def _backticked(section):
    return set(re.findall(r"`([\w+.-]+)`", section))


def test_configuration_lists_every_profile_field_and_no_other():
    from dbt.adapters.hudilite.credentials import HudiliteCredentials

    profile = _section(_read(os.path.join(DOCS, "configuration.md")), "## Profile fields", "\n## ")
    fields = {f.name for f in dataclasses.fields(HudiliteCredentials)} | {"type", "threads"}
    own = set(HudiliteCredentials.__annotations__) | {"type", "schema", "threads", "server_side_parameters"}
    table = _first_column(profile)
    assert own <= table, f"profile fields hudilite uses, missing from the table: {sorted(own - table)}"
    assert table <= fields, f"documented profile fields the credentials do not have: {sorted(table - fields)}"
    missing = fields - _backticked(profile)
    assert not missing, f"profile fields missing from docs/configuration.md: {sorted(missing)}"


def _model_config_keys_in_code():
    """Every model config key the adapter's code knows: `HudiliteConfig`'s fields (dbt-spark's
    among them), the table services and file sizing settings the build plan reads by name, and
    every key the adapter and its macros read from a model's config by name."""
    from dbt.adapters.hudilite.impl import HudiliteConfig
    from dbt.adapters.hudilite.table import FileSizing, TableServices

    keys = {f.name for f in dataclasses.fields(HudiliteConfig)} - {"_extra"}
    keys |= {f.name for f in dataclasses.fields(TableServices)} | {f.name for f in dataclasses.fields(FileSizing)}
    adapter = os.path.join(ROOT, "dbt", "adapters", "hudilite")
    macros = os.path.join(ROOT, "dbt", "include", "hudilite", "macros")
    sources = [os.path.join(adapter, n) for n in os.listdir(adapter) if n.endswith(".py")]
    sources += [os.path.join(d, n) for d, _, names in os.walk(macros) for n in names if n.endswith(".sql")]
    for path in sources:
        # config.get('key'), and helpers that take the config and a key: _flag(config, "key", ...)
        keys |= set(re.findall(r"(?<!getattr\()\bconfig(?:\.get\(|,)\s*['\"](\w+)['\"]", _read(path)))
    return keys


def test_configuration_lists_every_model_config_and_no_unknown_one():
    from dbt.artifacts.resources import NodeConfig, SnapshotConfig

    models = _section(_read(os.path.join(DOCS, "configuration.md")), "## Model configs")
    code = _model_config_keys_in_code()
    missing = code - _backticked(models)
    assert not missing, f"model configs the code reads, missing from docs/configuration.md: {sorted(missing)}"
    dbt_keys = {f.name for f in dataclasses.fields(NodeConfig)} | {f.name for f in dataclasses.fields(SnapshotConfig)}
    dbt_keys |= {"incremental_predicates", "merge_exclude_columns"}  # dbt's incremental configs NodeConfig keeps as extras
    unknown = _first_column(models) - code - dbt_keys
    assert not unknown, f"docs/configuration.md documents model configs no code knows: {sorted(unknown)}"
    # hudilite's own configs (not dbt's, nor dbt-spark's) each have a row in their table
    from dbt.adapters.spark.impl import SparkConfig

    spark_keys = {f.name for f in dataclasses.fields(SparkConfig)}
    own = _first_column(_section(models, "hudilite's own", "\n## "))
    # `predicates`: the older name of incremental_predicates; `snapshot_table_column_names`: what
    # dbt's snapshot macros (and ours, as theirs) read the snapshot's column names from
    expected = code - dbt_keys - spark_keys - {"predicates", "snapshot_table_column_names"}
    assert expected <= own <= code, f"hudilite's own model configs: documented {sorted(own)}, in the code {sorted(expected)}"
