#!/usr/bin/env bash
# Writes a throwaway CA, a server certificate for 127.0.0.1/localhost and a client certificate
# into DIR, named as DOCKER_CERT_PATH expects (ca.pem, cert.pem, key.pem) plus server-*.pem.
# Used by the client libraries' mutual-TLS tests.
set -euo pipefail
dir=${1:?usage: make-certs.sh DIR}
mkdir -p "$dir"
cd "$dir"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj '/CN=berth-test-ca' \
  -keyout ca-key.pem -out ca.pem 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj '/CN=127.0.0.1' -keyout server-key.pem -out server.csr 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' > server.ext
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 2 \
  -extfile server.ext -out server-cert.pem 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj '/CN=berth-test-client' -keyout key.pem -out client.csr 2>/dev/null
printf 'extendedKeyUsage=clientAuth\n' > client.ext
openssl x509 -req -in client.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 2 \
  -extfile client.ext -out cert.pem 2>/dev/null
rm -f server.csr client.csr server.ext client.ext ca.srl
chmod 600 ./*key.pem
