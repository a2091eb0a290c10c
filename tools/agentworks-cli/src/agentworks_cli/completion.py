"""`agentworks completion bash|zsh|fish`: a shell completion script, generated from the
argument parser itself, so it knows every command, action, option and choice there is.

The script needs nothing but the shell for these: each command path (`crews call`) maps
to the words that may follow it, and the options that take a value (after which the
shell completes that option's choices, or file names). Where an argument takes a name
the gateway knows (a crew, workflow or target, a function, a call, inbox or conversation
id), the bash and zsh scripts run the hidden `agentworks __complete` with the words typed
so far (complete.py: one request with the user's token, silent and at most about a
second); with nothing from it they complete as before. fish completes statically.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from agentworks_cli.complete import dynamic_paths

SHELLS = ("bash", "zsh", "fish")

HOW_TO_LOAD = {
    "bash": "# bash: add to ~/.bashrc:  source <(agentworks completion bash)",
    "zsh": "# zsh: add to ~/.zshrc after compinit:  source <(agentworks completion zsh)",
    "fish": "# fish: agentworks completion fish > ~/.config/fish/completions/agentworks.fish",
}


@dataclass
class Command:
    """What may follow one command path: words (with their help), and the options that
    take a value (with their choices; none: any value, such as a file name)."""

    words: list[tuple[str, str]] = field(default_factory=list)
    valued: dict[str, list[str]] = field(default_factory=dict)


def command_tree(parser: argparse.ArgumentParser) -> dict[str, Command]:
    """Command path ("" for `agentworks` itself, "crews call", ...) -> what may follow it."""
    tree: dict[str, Command] = {}

    def walk(node: argparse.ArgumentParser, path: str) -> None:
        command = tree.setdefault(path, Command())
        for action in node._actions:
            if isinstance(action, argparse._SubParsersAction):
                helps = {a.dest: a.help or "" for a in action._choices_actions}
                for name, sub in action.choices.items():
                    command.words.append((name, helps.get(name, "")))
                    walk(sub, f"{path} {name}".strip())
            elif action.option_strings:
                if action.help == argparse.SUPPRESS:
                    continue
                for option in action.option_strings:
                    command.words.append((option, action.help or ""))
                    if action.nargs != 0:
                        command.valued[option] = [str(c) for c in action.choices or ()]
            elif action.choices:  # a positional with choices: `completion bash`
                command.words += [(str(c), "") for c in action.choices]

    walk(parser, "")
    return tree


def _quote(text: str) -> str:
    """`text` as one single-quoted word in all three shells."""
    return "'" + text.replace("'", "'\\''") + "'"


def _one_line(text: str, limit: int = 70) -> str:
    text = " ".join(text.replace("%%", "%").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _case_lines(tree: dict[str, Command], body: Any, *, fish: bool = False) -> Iterator[str]:
    """The branches of a `case` (sh) or `switch` (fish) over command paths."""
    for path, command in tree.items():
        lines = body(command)
        if lines is None:
            continue
        if fish:
            yield f"        case {_quote(path)}"
            yield from (f"            {line}" for line in lines)
        else:
            yield f"        {_quote(path)})"
            yield from (f"            {line}" for line in lines)
            yield "            ;;"


def _sh_functions(tree: dict[str, Command], words_line: Any, dynamic: list[str]) -> list[str]:
    """`_agentworks_words PATH` (the words after PATH; status 1 for no such command),
    `_agentworks_valued PATH`, `_agentworks_choices PATH OPTION` and
    `_agentworks_dynamic PATH` (status 0 when an argument of PATH takes a name the
    gateway knows: `agentworks __complete` is asked), for bash and zsh."""
    out = ["_agentworks_words() {", '    case "$1" in']
    out += _case_lines(tree, lambda c: [words_line(c.words)])
    out += [
        "        *) return 1 ;;",
        "    esac",
        "}",
        "",
        "_agentworks_valued() {",
        '    case "$1" in',
    ]
    out += _case_lines(tree, lambda c: [f"echo {' '.join(c.valued)}"] if c.valued else None)
    out += ["    esac", "}", "", "_agentworks_choices() {", '    case "$1 $2" in']
    for path, command in tree.items():
        for option, choices in command.valued.items():
            if choices:
                out.append(f"        {_quote(f'{path} {option}')}) echo {' '.join(choices)} ;;")
    out += ["    esac", "}", "", "_agentworks_dynamic() {", '    case "$1" in']
    if dynamic:
        out.append(f"        {'|'.join(_quote(path) for path in dynamic)}) return 0 ;;")
    out += ["    esac", "    return 1", "}"]
    return out


# The names of `agentworks __complete` for the word being completed, in bash: the words
# typed so far come from COMP_LINE (bash splits `crew:demo` into three COMP_WORDS at the
# colon, COMP_WORDBREAKS), else from COMP_WORDS.
_BASH_NAMES = [
    "_agentworks_names() {",
    "    local -a typed",
    "    if [[ -n ${COMP_LINE+set} ]]; then",
    "        local line=${COMP_LINE:0:COMP_POINT}",
    '        read -ra typed <<< "$line"',
    '        [[ -z $line || $line == *[[:space:]] ]] && typed+=("")',
    "    else",
    '        typed=("${COMP_WORDS[@]:0:COMP_CWORD+1}")',
    "    fi",
    '    "${typed[0]}" __complete "${typed[@]:1}" 2>/dev/null </dev/null',
    "}",
]


def bash_script(tree: dict[str, Command], dynamic: list[str]) -> str:
    """The bash completion script (bash 3.2 or later)."""
    lines = [
        "# bash completion for agentworks, generated by `agentworks completion bash`.",
        HOW_TO_LOAD["bash"],
        "",
        *_sh_functions(tree, lambda words: "echo " + " ".join(w for w, _ in words), dynamic),
        "",
        *_BASH_NAMES,
        "",
        "_agentworks() {",
        '    local cur=${COMP_WORDS[COMP_CWORD]} path="" word next skip="" i',
        "    for ((i = 1; i < COMP_CWORD; i++)); do",
        "        word=${COMP_WORDS[i]}",
        '        if [[ -n $skip ]]; then skip=""; continue; fi',
        "        case $word in",
        "            --*=*) continue ;;",
        "            -*)",
        '                [[ " $(_agentworks_valued "$path") " == *" $word "* ]] && skip=1',
        "                continue ;;",
        "        esac",
        "        next=${path:+$path }$word",
        '        _agentworks_words "$next" >/dev/null && path=$next',
        "    done",
        '    if [[ $cur != -* ]] && _agentworks_dynamic "$path"; then',
        '        local names name full=$cur colon=""',
        "        names=$(_agentworks_names)",
        "        if [[ -n $names ]]; then",
        "            # bash split the word at its colons: offer what follows the last one.",
        "            if [[ -n ${COMP_LINE+set} ]]; then",
        "                full=${COMP_LINE:0:COMP_POINT}",
        "                full=${full##*[[:space:]]}",
        "            fi",
        '            [[ $full == *:* && $COMP_WORDBREAKS == *:* ]] && colon=${full%"${full##*:}"}',
        "            COMPREPLY=()",
        "            while IFS= read -r name; do",
        '                COMPREPLY+=("${name#"$colon"}")',
        '            done <<< "$names"',
        "            return",
        "        fi",
        "    fi",
        "    local candidates",
        "    if [[ -n $skip ]]; then",
        '        candidates=$(_agentworks_choices "$path" "${COMP_WORDS[COMP_CWORD-1]}")',
        "    else",
        '        candidates=$(_agentworks_words "$path")',
        "    fi",
        '    COMPREPLY=($(compgen -W "$candidates" -- "$cur"))',
        "}",
        "",
        "complete -o default -F _agentworks agentworks",
    ]
    return "\n".join(lines) + "\n"


def zsh_script(tree: dict[str, Command], dynamic: list[str]) -> str:
    """The zsh completion script: source it, or put it on $fpath as `_agentworks`."""

    def described(words: list[tuple[str, str]]) -> str:
        """`word:help` lines for _describe (a colon in the word escaped)."""
        entries = []
        for word, text in words:
            word = word.replace(":", "\\:")
            entries.append(_quote(f"{word}:{_one_line(text)}" if text else word))
        return "print -rl -- " + " ".join(entries)

    lines = [
        "#compdef agentworks",
        "# zsh completion for agentworks, generated by `agentworks completion zsh`.",
        HOW_TO_LOAD["zsh"],
        "",
        *_sh_functions(tree, described, dynamic),
        "",
        "_agentworks() {",
        '    local cmd_path="" word next skip="" i',
        "    local -a candidates",
        "    for ((i = 2; i < CURRENT; i++)); do",
        "        word=${words[i]}",
        '        if [[ -n $skip ]]; then skip=""; continue; fi',
        "        case $word in",
        "            --*=*) continue ;;",
        "            -*)",
        '                [[ " $(_agentworks_valued "$cmd_path") " == *" $word "* ]] && skip=1',
        "                continue ;;",
        "        esac",
        "        next=${cmd_path:+$cmd_path }$word",
        '        _agentworks_words "$next" >/dev/null && cmd_path=$next',
        "    done",
        '    if [[ ${words[CURRENT]} != -* ]] && _agentworks_dynamic "$cmd_path"; then',
        "        local found",
        '        found=$("${words[1]}" __complete "${(@)words[2,CURRENT]}" 2>/dev/null </dev/null)',
        "        candidates=(${(f)found})",
        "        if (( ${#candidates} )); then compadd -a candidates; return; fi",
        "    fi",
        "    if [[ -n $skip ]]; then",
        '        candidates=(${="$(_agentworks_choices "$cmd_path" "${words[CURRENT-1]}")"})',
        "        if (( ${#candidates} )); then compadd -a candidates; else _files; fi",
        "        return",
        "    fi",
        '    candidates=(${(f)"$(_agentworks_words "$cmd_path")"})',
        "    _describe -t commands agentworks candidates",
        "}",
        "",
        'if [[ "${funcstack[1]}" == _agentworks ]]; then',
        '    _agentworks "$@"',
        "else",
        "    compdef _agentworks agentworks",
        "fi",
    ]
    return "\n".join(lines) + "\n"


def fish_script(tree: dict[str, Command], dynamic: list[str]) -> str:
    """The fish completion script."""

    def described(command: Command) -> list[str]:
        return [f"printf '%s\\t%s\\n' {_quote(w)} {_quote(_one_line(h))}" for w, h in command.words]

    def valued(command: Command) -> list[str] | None:
        return (
            [f"printf '%s\\n' {' '.join(map(_quote, command.valued))}"] if command.valued else None
        )

    lines = [
        "# fish completion for agentworks, generated by `agentworks completion fish`.",
        HOW_TO_LOAD["fish"],
        "",
        "function __agentworks_words",
        '    switch "$argv[1]"',
        *_case_lines(tree, described, fish=True),
        "        case '*'",
        "            return 1",
        "    end",
        "end",
        "",
        "function __agentworks_valued",
        '    switch "$argv[1]"',
        *_case_lines(tree, valued, fish=True),
        "    end",
        "end",
        "",
        "function __agentworks_choices",
        '    switch "$argv[1] $argv[2]"',
    ]
    for path, command in tree.items():
        for option, choices in command.valued.items():
            if choices:
                lines.append(f"        case {_quote(f'{path} {option}')}")
                lines.append(f"            printf '%s\\n' {' '.join(map(_quote, choices))}")
    lines += [
        "    end",
        "end",
        "",
        "function __agentworks_complete",
        "    set -l tokens (commandline -opc)",
        "    set -l path ''",
        "    set -l skip 0",
        "    for word in $tokens[2..-1]",
        "        if test $skip = 1",
        "            set skip 0",
        "            continue",
        "        end",
        "        if string match -q -- '--*=*' $word",
        "            continue",
        "        else if string match -q -- '-*' $word",
        '            if contains -- $word (__agentworks_valued "$path")',
        "                set skip 1",
        "            end",
        "            continue",
        "        end",
        '        set -l next (string trim -- "$path $word")',
        '        if __agentworks_words "$next" >/dev/null',
        '            set path "$next"',
        "        end",
        "    end",
        "    if test $skip = 1",
        '        set -l choices (__agentworks_choices "$path" $tokens[-1])',
        "        if test (count $choices) -gt 0",
        "            printf '%s\\n' $choices",
        "        else",
        "            __fish_complete_path (commandline -ct)",
        "        end",
        "        return",
        "    end",
        '    __agentworks_words "$path"',
        "end",
        "",
        "complete -c agentworks -f -a '(__agentworks_complete)'",
    ]
    return "\n".join(lines) + "\n"


SCRIPTS = {"bash": bash_script, "zsh": zsh_script, "fish": fish_script}


def print_script(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """Print the completion script of `args.shell` for `parser` (the `agentworks` parser)."""
    script = SCRIPTS[args.shell](command_tree(parser), dynamic_paths(parser))
    print(script, end="", flush=True)
    return 0


def add_commands(commands: Any) -> None:
    """Add `completion` to the `agentworks` parser (it needs no gateway and no token)."""
    completion = commands.add_parser(
        "completion",
        help="print a shell completion script (bash, zsh or fish)",
        description="Print the completion script of SHELL on stdout, made from this CLI's "
        "own commands and options. " + " ".join(h.lstrip("# ") + "." for h in HOW_TO_LOAD.values()),
    )
    completion.add_argument("shell", metavar="SHELL", choices=SHELLS, help="bash, zsh or fish")
    completion.set_defaults(offline=print_script)
