#!/usr/bin/env bash
# Headless Chromium and its WebDriver from Debian's own packages, for tests/test_web_browser.py.
# Idempotent and non-interactive: does nothing when both binaries are already there. Nothing
# downloads a browser at install time (Selenium is pointed at these binaries).
set -euo pipefail

if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
  echo "chromium and chromedriver already installed: $(/usr/bin/chromium --version 2>/dev/null || true)"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
  else
    echo "install_browser.sh: need root (or sudo) to apt-get install chromium chromium-driver" >&2
    exit 1
  fi
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install_browser.sh: apt-get not found; install chromium and chromedriver with your" \
    "system's package manager (the browser tests skip without them)" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq chromium chromium-driver
/usr/bin/chromium --version
