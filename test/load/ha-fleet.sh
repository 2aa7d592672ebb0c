#!/usr/bin/env bash
# ha-fleet.sh N DURATION: runs `knode sim fleet` of N nodes for DURATION
# against one `knode server` on embedded etcd (the baseline), then against
# three `knode server`s on a three-member etcd cluster (Debian's etcd,
# started here on loopback ports), one after the other on this machine, and
# prints each fleet's JSON line after a label. Everything it starts lives in
# a temporary directory and is stopped at exit.
#
#   KNODE=/path/to/knode ETCD=/usr/bin/etcd test/load/ha-fleet.sh 5000 10m
#
# ONLY=one or ONLY=three runs just that set-up (for a search that has already
# found the other's limit).
set -euo pipefail
N=${1:-5000}
DURATION=${2:-10m}
ONLY=${ONLY:-}
case "$ONLY" in
"" | one | three) ;;
*) echo "ONLY must be one, three or empty, not $ONLY" >&2; exit 2 ;;
esac
KNODE=${KNODE:-knode}
ETCD=${ETCD:-etcd}
work=$(mktemp -d /tmp/knode-ha-fleet.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 143' INT TERM

# server DIR ARGS...: starts `knode server` on a free port; sets url to its
# URL. (Not a command substitution: the pid must reach this shell's list.)
server() {
	local dir=$1; shift
	"$KNODE" server --data-dir "$dir" --secure-port 0 --storage-dir "$work/storage" "$@" >"$dir.log" 2>&1 &
	pids+=($!)
	for _ in $(seq 600); do
		if grep -q 'knode server ready' "$dir.log" 2>/dev/null; then
			url=$(grep -o 'url=https://[^ ]*' "$dir.log" | head -1 | cut -d= -f2)
			return
		fi
		sleep 0.1
	done
	echo "server $dir did not start:" >&2
	tail -20 "$dir.log" >&2
	exit 1
}

fleet() {
	local label=$1; shift
	echo "== $label: $N nodes for $DURATION" >&2
	local out
	out=$("$KNODE" sim fleet --nodes "$N" --zones 3 --duration "$DURATION" --progress-interval 60s "$@")
	echo "$label $out"
}

stop_all() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	pids=()
}

# Baseline: one server, embedded etcd.
if [ "$ONLY" != three ]; then
	mkdir -p "$work/one"
	server "$work/one"
	fleet one-server-embedded-etcd --kubeconfig "$work/one/admin.kubeconfig"
	stop_all
fi
[ "$ONLY" != one ] || exit 0

# Three servers on a three-member etcd cluster.
base=$((20000 + RANDOM % 20000))
cluster=""
for i in 0 1 2; do
	cluster+="${cluster:+,}m$i=http://127.0.0.1:$((base + 2 * i + 1))"
done
endpoints=""
for i in 0 1 2; do
	client=http://127.0.0.1:$((base + 2 * i))
	peer=http://127.0.0.1:$((base + 2 * i + 1))
	endpoints+="${endpoints:+,}$client"
	"$ETCD" --name "m$i" --data-dir "$work/etcd$i" --listen-client-urls "$client" --advertise-client-urls "$client" \
		--listen-peer-urls "$peer" --initial-advertise-peer-urls "$peer" --initial-cluster "$cluster" \
		>"$work/etcd$i.log" 2>&1 &
	pids+=($!)
done
server "$work/a" --etcd-servers "$endpoints"
a=$url
server "$work/b" --etcd-servers "$endpoints" --token-file "$work/a/token"
b=$url
server "$work/c" --etcd-servers "$endpoints" --token-file "$work/a/token"
c=$url
fleet three-servers-three-member-etcd --kubeconfig "$work/a/admin.kubeconfig" --server "$a" --server "$b" --server "$c"
