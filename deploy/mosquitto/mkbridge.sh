#!/usr/bin/env bash
# One cluster's broker bridged into the site broker (Mosquitto bridge; docs/security.md,
# "Many clusters: bridges").
#   deploy/mosquitto/mkbridge.sh CLUSTER SITE_HOST:PORT PASSWORD CA_FILE OUT_DIR [telemetry]
# Writes two files:
#   OUT_DIR/bridge-CLUSTER.conf   include it in the CLUSTER broker's mosquitto.conf
#                                 (include_dir, or paste it at the end);
#   OUT_DIR/acl-bridge-CLUSTER    append it to the SITE broker's acl.
# PASSWORD is the site broker's password for the user 'bridge-CLUSTER' (make it with
# mkusers.sh on the site broker). CA_FILE is the CA that signed the site broker's certificate.
# Out to the site: births, statuses, events, acks, job statuses, the scheduler's acks and
# status (its birth and Last Will), and the collectors' digests, births and Last Wills (what
# consoles on the site broker show and audit; without the births a site console on digests
# knew of no collector, live or dead); and the bridge's own state (Mosquitto's notification,
# "1"/"0" on bridge/state, its Last Will "0": a site console says the bridge is down). In from the site: node and scheduler commands and
# rebirth requests (commands are signed end to end with the command key, docs/security.md, so
# the bridge carries them but cannot forge them).
# Full telemetry (about 1 KB per node-second in wire v2) crosses only with the 6th argument
# 'telemetry': node detail on the site then shows live figures; without it the site's consoles
# judge nodes from the cluster's digests.
set -euo pipefail
if [ $# -lt 5 ]; then
  echo "usage: $0 CLUSTER SITE_HOST:PORT PASSWORD CA_FILE OUT_DIR [telemetry]" >&2
  exit 2
fi
cluster=$1; site=$2; password=$3; ca=$4; out=$5; telemetry=${6:-}
if ! [[ $cluster =~ ^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$ ]]; then
  echo "invalid cluster name '$cluster' (letters, digits, . _ -)" >&2
  exit 2
fi
if [ -n "$telemetry" ] && [ "$telemetry" != telemetry ]; then
  echo "the 6th argument is 'telemetry' or nothing, not '$telemetry'" >&2
  exit 2
fi
root="fleetdeck/v1/$cluster"
mkdir -p "$out"
umask 077
{
  echo "# Bridge of cluster '$cluster' into the site broker (made by mkbridge.sh)."
  echo "connection site-$cluster"
  echo "address $site"
  echo "remote_clientid bridge-$cluster"
  echo "remote_username bridge-$cluster"
  echo "remote_password $password"
  echo "bridge_cafile $ca"
  echo "bridge_protocol_version mqttv311"
  # A clean session on the site side would lose queued commands across a bridge restart.
  echo "cleansession false"
  echo "try_private true"
  # Retained births and statuses keep their retain flag: a console started later on the site
  # learns every node's session and drain state, as it would on the cluster broker.
  echo "bridge_outgoing_retain true"
  echo "start_type automatic"
  echo "restart_timeout 2 30"
  # A network cut (no broker dies, no TCP reset) is seen by the site broker only after 1.5 x
  # the keepalive with nothing heard: at Mosquitto's default 60 s its "0" came ~90 s late,
  # after every node of the cluster had gone stale as a collector's (stale 3 digest periods
  # after its last, so from 10 s after the cut at the default 5 s). 5 s, Mosquitto's least,
  # says it within ~8 s, before any node; it costs no traffic, digests cross every 5 s and
  # a ping goes only on an idle link (docs/security.md).
  echo "keepalive_interval 5"
  # The bridge's own state on the site broker, under the cluster's root: "1" (retained) when
  # it connects, "0" its Last Will there when the cluster broker or the bridge dies. A site
  # console says "the bridge from cluster X is down" instead of every node going stale
  # (docs/security.md). Mosquitto publishes it on the cluster broker too.
  echo "notifications true"
  echo "notifications_local_only false"
  echo "notification_topic $root/bridge/state"
  echo "topic $root/node/+/birth out 1"
  echo "topic $root/node/+/status out 1"
  echo "topic $root/node/+/event out 1"
  echo "topic $root/node/+/ack out 1"
  echo "topic $root/job/+/status out 1"
  echo "topic $root/sched/ack out 1"
  echo "topic $root/sched/status out 1"
  echo "topic $root/digest/# out 1"
  # The collectors' births and Last Wills (retained): a site console on digests lists them and
  # says when none is live, as on the cluster broker (docs/architecture.md, "Sharded collectors").
  echo "topic $root/collector/+ out 1"
  if [ -n "$telemetry" ]; then
    echo "topic $root/node/+/telemetry out 0"
  fi
  echo "topic $root/node/+/cmd in 1"
  echo "topic $root/sched/cmd in 1"
  echo "topic $root/ctl/rebirth in 1"
} > "$out/bridge-$cluster.conf"
{
  echo "# The bridge of cluster '$cluster' (made by mkbridge.sh): publishes that cluster's"
  echo "# node, job, scheduler, digest and collector topics, reads its commands; nothing of"
  echo "# any other cluster."
  echo "user bridge-$cluster"
  for kind in birth status telemetry event ack; do
    echo "topic write $root/node/+/$kind"
  done
  echo "topic write $root/job/+/status"
  echo "topic write $root/sched/ack"
  echo "topic write $root/sched/status"
  echo "topic write $root/digest/#"
  echo "topic write $root/collector/+"
  echo "topic write $root/bridge/state"
  echo "topic read $root/node/+/cmd"
  echo "topic read $root/sched/cmd"
  echo "topic read $root/ctl/rebirth"
  echo "topic deny fleetdeck/v1/+/node/bridge-$cluster/#"
} > "$out/acl-bridge-$cluster"
echo "wrote $out/bridge-$cluster.conf and $out/acl-bridge-$cluster"
