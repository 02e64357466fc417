#!/bin/sh
# A stand-in for agents at work, for the compose stack's live follower: every few seconds it
# starts a new Claude Code session file in DIR and writes deploy/demo/claude-code-session.jsonl
# into it a line at a time, timed now. Each session: a test run that fails, a read and a grep
# made in parallel, an edit, a test run that passes, and a call still running when the user
# starts the next turn (Interrupted once the turn grace has passed).
#
#   deploy/demo/agent.sh DIR [SESSIONS] [PAUSE]   # SESSIONS: how many (default: forever);
#                                                 # PAUSE: seconds between lines (default 0.5)
set -eu
dir="$1"
sessions="${2:-0}"
pause="${3:-0.5}"
template="${TEMPLATE:-$(dirname "$0")/claude-code-session.jsonl}"
mkdir -p "$dir"
n=0
while [ "$sessions" -eq 0 ] || [ "$n" -lt "$sessions" ]; do
  n=$((n + 1))
  session="demo-$(date -u +%Y%m%d%H%M%S)-$n"
  file="$dir/$session.jsonl"
  while IFS= read -r line; do
    now="$(date -u +%Y-%m-%dT%H:%M:%S.000Z)"
    printf '%s\n' "$line" | sed -e "s/__SESSION__/$session/g" -e "s/__TIME__/$now/g" -e "s/__N__/$n/g" >> "$file"
    sleep "$pause"
  done < "$template"
done
