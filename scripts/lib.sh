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
