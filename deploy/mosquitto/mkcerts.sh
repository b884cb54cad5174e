#!/usr/bin/env bash
# A private CA, a broker certificate and optional client certificates, with openssl.
#   deploy/mosquitto/mkcerts.sh OUT_DIR BROKER_HOST [CLIENT_CN ...]
# BROKER_HOST goes into the certificate's subjectAltName (DNS name or IP address).
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 OUT_DIR BROKER_HOST [CLIENT_CN ...]" >&2
  exit 2
fi
out=$1; host=$2; shift 2
mkdir -p "$out"; cd "$out"
umask 077
days=825
if [[ $host =~ ^[0-9.]+$ ]]; then san="IP:$host"; else san="DNS:$host"; fi
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days "$days" \
  -subj "/CN=fleetdeck CA" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj "/CN=$host" 2>/dev/null
printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\n' "$san" > server.ext
openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt \
  -days "$days" -extfile server.ext 2>/dev/null
for cn in "$@"; do
  openssl req -newkey rsa:2048 -nodes -keyout "$cn.key" -out "$cn.csr" -subj "/CN=$cn" 2>/dev/null
  printf 'extendedKeyUsage=clientAuth\n' > client.ext
  openssl x509 -req -in "$cn.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$cn.crt" \
    -days "$days" -extfile client.ext 2>/dev/null
done
rm -f ./*.csr ./*.ext
chmod 644 ca.crt server.crt
echo "CA: $out/ca.crt  broker: $out/server.crt $out/server.key"
