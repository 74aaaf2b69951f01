# SPDX-License-Identifier: Apache-2.0
# bash completion for airlock and airlockd. The commands and options are
# read from the programs' own full help (AIRLOCK_HELP=full), so completion
# offers exactly what the installed binary accepts.

_airlock_words() {
        # $1: the program, then the command words; prints the options found
        # in their help.
        AIRLOCK_HELP=full "$@" --help 2>/dev/null |
                grep -oE '(^|[ ,])--?[a-zA-Z][a-zA-Z0-9-]*' | tr -d ' ,' | sort -u
}

_airlock() {
        local cur prev cmd i
        cur=${COMP_WORDS[COMP_CWORD]}
        prev=${COMP_WORDS[COMP_CWORD-1]}
        if [[ $COMP_CWORD -eq 1 ]]; then
                local cmds
                cmds=$(AIRLOCK_HELP=full "${COMP_WORDS[0]}" --help 2>/dev/null |
                        sed -n '/^Commands:/,/^$/s/^  \([a-z][a-z-]*\) .*/\1/p')
                COMPREPLY=($(compgen -W "$cmds --help --version" -- "$cur"))
                return
        fi
        cmd=${COMP_WORDS[1]}
        for ((i = 2; i < COMP_CWORD; i++)); do
                [[ ${COMP_WORDS[i]} == -- ]] && { COMPREPLY=($(compgen -c -- "$cur")); return; }
        done
        case $prev in
        -p|--policy|-w|--workspace|--ro|--rw|--deny-read|--secrets|--tools|--audit|--result|--net-log|--state-root|--state-dir|--run-dir|--socket)
                COMPREPLY=($(compgen -f -- "$cur"))
                return ;;
        esac
        if [[ $cur == -* ]]; then
                local sub=()
                [[ $cmd == audit && $COMP_CWORD -gt 2 ]] && sub=("${COMP_WORDS[2]}")
                COMPREPLY=($(compgen -W "$(_airlock_words "${COMP_WORDS[0]}" "$cmd" "${sub[@]}")" -- "$cur"))
        elif [[ $cmd == audit && $COMP_CWORD -eq 2 ]]; then
                COMPREPLY=($(compgen -W "verify show" -- "$cur"))
        elif [[ $cmd == grant && $COMP_CWORD -eq 2 ]]; then
                COMPREPLY=($(compgen -W "create revoke ls" -- "$cur"))
        else
                COMPREPLY=($(compgen -f -- "$cur"))
        fi
}

_airlockd() {
        local cur=${COMP_WORDS[COMP_CWORD]}
        if [[ $cur == -* ]]; then
                COMPREPLY=($(compgen -W "$(_airlock_words "${COMP_WORDS[0]}")" -- "$cur"))
        else
                COMPREPLY=($(compgen -f -- "$cur"))
        fi
}

complete -F _airlock airlock
complete -F _airlockd airlockd
