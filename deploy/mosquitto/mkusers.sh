#!/usr/bin/env bash
# Create broker users with random passwords.
#   deploy/mosquitto/mkusers.sh PASSWD_FILE CREDENTIALS_FILE USER [USER ...]
# Users are node ids or role names (see acl):
#   * a node agent logs in with its node id (its --node-id, by default the short host name) as
#     user name; the acl's %u patterns let it publish only under that node's topics;
#   * console, viewer, scheduler, collector, admin and one user per operator: each has a 'user' block in the acl,
#     ending with a deny line for node topics under its own name.
# Appends to PASSWD_FILE (mosquitto_passwd format) and writes "user password" lines to
# CREDENTIALS_FILE (mode 600). A node's line becomes its /etc/fleetdeck/agent.env entry
#   FLEETDECK_BROKER=mqtts://<node id>:<password>@<broker>:8883   (docs/real-nodes.md)
set -euo pipefail
if [ $# -lt 3 ]; then
  echo "usage: $0 PASSWD_FILE CREDENTIALS_FILE USER [USER ...]" >&2
  exit 2
fi
passwd_file=$1; creds=$2; shift 2
command -v mosquitto_passwd >/dev/null || { echo "mosquitto_passwd not found (apt-get install mosquitto)" >&2; exit 1; }
umask 077
for user in "$@"; do  # every name checked before anything is written
  if ! [[ $user =~ ^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$ ]]; then
    echo "invalid user name '$user' (letters, digits, . _ -)" >&2
    exit 2
  fi
done
# A name given twice is made once: both lines went into PASSWD_FILE and CREDENTIALS_FILE with
# two passwords, of which the broker takes one and the credentials file does not say which.
declare -A seen=()
users=()
for user in "$@"; do
  [[ -n ${seen[$user]+x} ]] || users+=("$user")
  seen[$user]=1
done
set -- "${users[@]}"
# A link (to where configuration management keeps it) stays one: the copy renamed below goes
# over the file it names, not over the link.
if [ -L "$passwd_file" ]; then passwd_file=$(readlink -f -- "$passwd_file"); fi
touch "$passwd_file" "$creds"
# One mosquitto_passwd call for all of them (-U hashes a plain "user:password" file in place):
# a call per user took 9 s for 256 users, minutes for a 4,096-node fleet. A user already in
# PASSWD_FILE gets its new password, as mosquitto_passwd -b would.
work=$(mktemp -d)
next="$passwd_file.mkusers.$$"
# The copy too: a run that fails or is stopped (SIGTERM, ^C) between the copy and the rename
# left it beside the password file, with every user's hash in it.
trap 'rm -rf "$work"; rm -f "$next"' EXIT
printf '%s\n' "$@" > "$work/users"
# 24 random letters and digits a user, read in one go (a pipeline per user cost as much again).
# (tr ends on SIGPIPE once head has enough: not a failure, so no pipefail for this line)
(set +o pipefail; LC_ALL=C tr -dc 'A-Za-z0-9' < /dev/urandom | head -c $((24 * $#)) | fold -w 24) \
  > "$work/passes"
paste -d: "$work/users" "$work/passes" > "$work/new"
paste -d' ' "$work/users" "$work/passes" > "$work/creds"
mosquitto_passwd -U "$work/new"
awk -F: 'NR == FNR { drop[$1]; next } !($1 in drop)' "$work/new" "$passwd_file" > "$work/kept"
# A copy beside it with the file's owner and mode (mosquitto may read it), filled and then
# renamed over it: a run killed midway leaves the old file whole, never a truncated one.
if ! cp -p "$passwd_file" "$next"; then
  echo "cannot write beside $passwd_file in $(dirname -- "$passwd_file") (the file is replaced by" \
       "a copy renamed over it): nothing written; run it as a user who may write there" >&2
  exit 1
fi
cat "$work/kept" "$work/new" > "$next"
# The credentials before the rename: a run killed between them leaves passwords written down
# for users the broker does not know yet (run it again), never users it knows whose passwords
# nobody wrote down.
cat "$work/creds" >> "$creds"
mv -f "$next" "$passwd_file"
