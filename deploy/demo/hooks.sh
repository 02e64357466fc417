#!/bin/sh
# A stand-in for Claude Code's hooks, for the compose stack's receiver: every few seconds it posts
# deploy/demo/claude-code-hooks.jsonl to the receiver a payload at a time, as the hook command of
# docs/OPERATIONS.md ("Receiving over HTTP") does, each round as a session of its own.
#
#   deploy/demo/hooks.sh URL TOKEN_FILE [ROUNDS] [PAUSE]   # URL: the receiver's hook route;
#                                                          # TOKEN_FILE: its token, waited for;
#                                                          # ROUNDS: how many (default: forever);
#                                                          # PAUSE: seconds between payloads
#                                                          # (default 0.5)
set -eu
url="$1"
token_file="$2"
rounds="${3:-0}"
pause="${4:-0.5}"
template="${TEMPLATE:-$(dirname "$0")/claude-code-hooks.jsonl}"
# The receiver makes its token when it first starts.
waited=0
while [ ! -s "$token_file" ]; do
  waited=$((waited + 1))
  if [ "$waited" -gt 120 ]; then
    echo "hooks.sh: no token in $token_file after 120 s" >&2
    exit 1
  fi
  sleep 1
done
# The header from a file: a token on curl's command line would show in the process list.
auth="$(mktemp)"
trap 'rm -f "$auth"' EXIT
printf 'Authorization: Bearer %s\n' "$(cat "$token_file")" > "$auth"
n=0
while [ "$rounds" -eq 0 ] || [ "$n" -lt "$rounds" ]; do
  n=$((n + 1))
  session="hooks-$(date -u +%Y%m%d%H%M%S)-$n"
  while IFS= read -r line; do
    printf '%s\n' "$line" |
      sed -e "s/\"session_id\":\"demo\"/\"session_id\":\"$session\"/" -e "s/toolu_demo_/toolu_${session}_/g" |
      curl -sSf -m 5 -H "@$auth" --data-binary @- "$url" > /dev/null ||
      echo "hooks.sh: a payload of $session was not accepted" >&2
    sleep "$pause"
  done < "$template"
done
