#!/usr/bin/env bash
# Create broker users with random passwords.
#   deploy/mosquitto/mkusers.sh PASSWD_FILE CREDENTIALS_FILE USER [USER ...]
# Users are node ids (agents) or role names (console, viewer, scheduler; see acl).
# Appends to PASSWD_FILE (mosquitto_passwd format) and writes "user password" lines to
# CREDENTIALS_FILE (mode 600) for distributing to agents (e.g. in /etc/fleetdeck/agent.env).
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
