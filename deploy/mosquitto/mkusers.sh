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
touch "$passwd_file" "$creds"
for user in "$@"; do
  if ! [[ $user =~ ^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$ ]]; then
    echo "invalid user name '$user' (letters, digits, . _ -)" >&2
    exit 2
  fi
  pass=$(head -c 24 /dev/urandom | base64 | tr -d '/+=' | head -c 24)
  mosquitto_passwd -b "$passwd_file" "$user" "$pass"
  echo "$user $pass" >> "$creds"
done
