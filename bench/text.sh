#!/bin/sh
# Writes the perplexity text: the Book of Genesis, King James Version (public
# domain), from Debian's bible-kjv packages, verse numbers stripped.
#   bench/text.sh > genesis.txt
set -eu
command -v bible >/dev/null 2>&1 || {
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get install -y -qq bible-kjv bible-kjv-text >&2
}
bible -f "Genesis 1:1-50:26" | sed -E 's/^[1-3]?[A-Za-z]+[0-9]+:[0-9]+ //'
