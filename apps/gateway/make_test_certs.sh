#!/usr/bin/env bash
# Throwaway certificates for the gateway's HTTPS tests and `make demo`,
# generated with the openssl CLI (OpenSSL 3.0, Debian 12) into DIR:
#
#   ca.pem ca.key               "fusebox test CA", the CA the tests trust
#   server.pem server.key       localhost, 127.0.0.1 and ::1; valid now
#   wrong_host.pem/.key         valid now, but only for wrong-host.example
#   expired.pem/.key            localhost, valid 2020-01-01 .. 2021-01-01
#   not_yet_valid.pem/.key      localhost, valid from 2099-01-01
#   unknown_ca.pem/.key         localhost, issued by another CA nobody trusts
#   client.pem client.key       a client certificate issued by ca.pem (mTLS)
#
# The past and future validity dates come from `openssl ca -startdate
# -enddate` (OpenSSL 3.0's `x509 -req` sets no start date), so no faked clock
# is needed. Keys are EC P-256: fast to make and to handshake.
#
#   apps/gateway/make_test_certs.sh "$(mktemp -d)"
set -euo pipefail

dir=${1:?usage: make_test_certs.sh DIR}
mkdir -p "$dir"
cd "$dir"

key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

# A CA: self-signed, with the database `openssl ca` keeps.
make_ca() {
  local name=$1 subject=$2
  mkdir -p "$name.db"
  : >"$name.db/index.txt"
  echo 1000 >"$name.db/serial"
  key "$name.key"
  openssl req -x509 -new -key "$name.key" -subj "/CN=$subject" -days 3650 -sha256 \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -out "$name.pem" 2>/dev/null
  cat >"$name.cnf" <<EOF
[ca]
default_ca = this
[this]
dir = $name.db
database = \$dir/index.txt
serial = \$dir/serial
new_certs_dir = \$dir
certificate = $name.pem
private_key = $name.key
default_md = sha256
policy = anything
unique_subject = no
copy_extensions = none
[anything]
commonName = supplied
[server]
basicConstraints = CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = \$ENV::SAN
[client]
basicConstraints = CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = clientAuth
EOF
}

# issue CA NAME CN SAN EXTENSIONS START END: NAME.pem and NAME.key, signed by CA.
issue() {
  local ca=$1 name=$2 cn=$3 san=$4 ext=$5 start=$6 end=$7
  key "$name.key"
  openssl req -new -key "$name.key" -subj "/CN=$cn" -out "$name.csr" 2>/dev/null
  SAN=$san openssl ca -batch -notext -config "$ca.cnf" -extensions "$ext" \
    -startdate "$start" -enddate "$end" -in "$name.csr" -out "$name.pem" 2>/dev/null
  rm -f "$name.csr"
}

later=$(date -u -d '+30 days' +%Y%m%d%H%M%SZ)
local_san="DNS:localhost,IP:127.0.0.1,IP:::1"

make_ca ca "fusebox test CA"
make_ca other_ca "fusebox untrusted CA"
# Valid from an hour ago: a clock a little behind still accepts it.
start=$(date -u -d '-1 hour' +%Y%m%d%H%M%SZ)
issue ca server localhost "$local_san" server "$start" "$later"
issue ca wrong_host wrong-host.example "DNS:wrong-host.example" server "$start" "$later"
issue ca expired localhost "$local_san" server 20200101000000Z 20210101000000Z
issue ca not_yet_valid localhost "$local_san" server 20990101000000Z 20991231000000Z
issue other_ca unknown_ca localhost "$local_san" server "$start" "$later"
issue ca client "fusebox test client" "" client "$start" "$later"
echo "$dir"
