# Helpers the scripts source. Loopback only; they stop nothing.

# wait_ready ADDR LOG: wait up to 10 s for the node at ADDR (host:port) to
# answer /readyz; on failure print LOG (its output) and fail.
wait_ready() {
  local addr=$1 log=$2
  for _ in $(seq 1 100); do
    curl -fsS "http://$addr/readyz" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  curl -fsS "http://$addr/readyz" >/dev/null || { cat "$log"; return 1; }
}

# secure_single DIR: what a throwaway one-node cluster needs to run the
# secure way, under DIR: a CA and a certificate for node1, a gossip key and
# an admin token (exported as QUORATE_TOKEN). Needs bin/quorate.
secure_single() {
  ./bin/quorate certs init --dir "$1/certs" --nodes node1 >/dev/null
  (umask 077; ./bin/quorate token new --name scripts --role admin --auth-file "$1/auth.json" 2>/dev/null >"$1/token")
  QUORATE_TOKEN=$(cat "$1/token")
  export QUORATE_TOKEN
}

# secure_flags DIR: the serve flags of the node secure_single prepared.
secure_flags() {
  local c=$1/certs
  echo "--node-id node1 --cluster-ca $c/ca.pem --cluster-cert $c/node1.pem --cluster-key $c/node1-key.pem --gossip-key $c/gossip.key --auth-file $1/auth.json"
}
