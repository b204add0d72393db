#!/usr/bin/env bash
# What the test suite needs besides Node: redis-server (tests start their own on loopback
# ports), promtool and prometheus (Debian package `prometheus`: metrics lint, alert-rule
# tests, a real scrape), chromium (Debian package `chromium`: the headless browser
# test/process/browser.test.ts drives with puppeteer-core), ruby (Debian package `ruby`:
# test/process/ruby-dispatcher.test.ts runs examples/ruby-dispatcher with it). Run by
# `npm test` (pretest) and by .ci/run.
#
# Finds them on PATH. Missing ones are installed with apt when this runs as root on a
# machine with apt-get (CI, containers), without starting their daemons; otherwise it stops
# at once, printing the command to run. Starts no service.
set -euo pipefail

# Tests point this elsewhere so they never touch the real file.
policy=${LONGRUN_POLICY_RC_D:-/usr/sbin/policy-rc.d}

missing=()
packages=()
need() {
  local binary=$1 package=$2
  command -v "$binary" >/dev/null 2>&1 && return 0
  missing+=("$binary")
  [[ " ${packages[*]} " == *" $package "* ]] || packages+=("$package")
}
need redis-server redis-server
need promtool prometheus
need prometheus prometheus
need chromium chromium
need ruby ruby

if ((${#missing[@]} == 0)); then exit 0; fi

if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
  echo "ensure-test-deps: installing ${packages[*]} (for ${missing[*]})"
  # Keep the packages' init scripts from starting daemons nobody asked for (exit 101 =
  # "action forbidden" for invoke-rc.d); only when no policy is in place already.
  if [[ ! -e $policy ]]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod +x "$policy"
    trap 'rm -f "$policy"' EXIT
  fi
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${packages[@]}"
  for binary in "${missing[@]}"; do
    if ! command -v "$binary" >/dev/null 2>&1; then
      echo "ensure-test-deps: $binary is still not on PATH after installing ${packages[*]}" >&2
      exit 1
    fi
  done
  exit 0
fi

{
  echo "ensure-test-deps: the tests need ${missing[*]}, not found on PATH."
  if command -v apt-get >/dev/null 2>&1; then
    echo "Install with:"
    echo "  sudo apt-get update && sudo apt-get install -y --no-install-recommends ${packages[*]}"
  else
    echo "Install the packages that provide them (Debian/Ubuntu: ${packages[*]}; Homebrew: redis prometheus chromium ruby), then run npm test again."
  fi
} >&2
exit 1
