#!/usr/bin/env bash
# scripts/hosts.sh as a user meets it (issue 27: locked against other users; issue 31, probe case 6):
# arguments it cannot take are one line each and make nothing; while the owner of the hosts lives,
# another `up` waits and gives up naming it, and another `down` refuses without --force.
set -uo pipefail
hosts="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/scripts/hosts.sh"
# The machine's own state and lock: the hosts are one per machine, and this test takes its turn.
state=${ZT_HOSTS_STATE:-/run/zt-hosts}
fail() { echo "FAIL: $*"; ZT_HOSTS_OWNER=$$ "$hosts" down --force >/dev/null 2>&1; exit 1; }
# expect CODE SAYS CMD...: the command exits CODE and its one line of stderr says SAYS.
expect() {
  local code=$1 says=$2 out rc
  shift 2
  out=$("$@" 2>&1 >/dev/null)
  rc=$?
  [ "$rc" = "$code" ] || fail "$* exited $rc, not $code: $out"
  [ "$(printf '%s\n' "$out" | grep -c .)" = 1 ] || fail "$* said more than one line: $out"
  [[ $out == *"$says"* ]] || fail "$* said '$out', not '$says'"
}
expect 1 "usage: hosts.sh with N RATE -- CMD" "$hosts" with
expect 1 "usage: hosts.sh kill HOST" "$hosts" kill
for rate in fast 1.5gbit 0gbit; do
  expect 1 "rate '$rate' is not a whole number" "$hosts" up 2 "$rate"
done
ip netns list 2>/dev/null | grep -q '^zt-host' && fail "a refused up made hosts"

# The owner: a process that lives while the test looks (ZT_HOSTS_OWNER names it).
sleep 60 &
owner=$!
out=$(ZT_HOSTS_OWNER=$owner ZT_HOSTS_WAIT_S=10 "$hosts" up 2 none 2>&1)
rc=$?
if [ "$rc" = 77 ]; then kill $owner; echo "skipped: $out"; exit 77; fi
if [[ $out == *"held by"* ]]; then kill $owner; echo "skipped: another user holds the test hosts: $out"; exit 77; fi
[ "$rc" = 0 ] || fail "up exited $rc"
out=$(ZT_HOSTS_WAIT_S=2 "$hosts" up 2 none 2>&1)
[ $? = 1 ] && [[ $out == *"held by pid $owner"*"waited 2 s"* ]] || fail "a second up did not wait for the owner: $out"
expect 1 "held by pid $owner" "$hosts" down
"$hosts" status >/dev/null || fail "a refused down removed the hosts"
kill $owner
wait $owner 2>/dev/null
# A job started inside a host outlives the owner: a later up waits for it, and leaves it running.
"$hosts" exec zt-host1 sleep 60 &
for _ in 1 2 3 4 5 6 7 8 9 10; do [ -n "$(ip netns pids zt-host1 2>/dev/null)" ] && break; sleep 0.2; done
job=$(ip netns pids zt-host1 2>/dev/null | head -1)
[ -n "$job" ] || fail "the job did not start inside zt-host1"
out=$(ZT_HOSTS_WAIT_S=2 "$hosts" up 2 none 2>&1)
[ $? = 1 ] && [[ $out == *"held by pid $job"* ]] || fail "up did not wait for a job inside the hosts: $out"
kill -0 "$job" 2>/dev/null || fail "up killed the job running inside the hosts"
kill "$job" 2>/dev/null
wait 2>/dev/null
"$hosts" down || fail "down after the owner ended"
ip netns list 2>/dev/null | grep -q '^zt-host' && fail "down left hosts"
mkdir -p "$state" && touch "$state/mine"
"$hosts" down
[ -f "$state/mine" ] || fail "down removed a file it did not make"
rm -f "$state/mine"
rmdir "$state" 2>/dev/null
echo "hosts.sh: arguments, owner and down checked"
