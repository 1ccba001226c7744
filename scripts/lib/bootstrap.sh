# Shared by scripts/test and scripts/demo: make a fresh Debian machine ready to run umt.
# Installs system packages only when running as root; creates .venv and installs umt into it.
# shellcheck shell=bash

readonly VENV=.venv
readonly INSTALL_STAMP="$VENV/.umt-installed-pyproject.sha256"

section() { printf '\n==> %s\n' "$*" >&2; }
fail() { printf '%s: %s\n' "$(basename "$0")" "$1" >&2; exit "${2:-1}"; }

python_is_recent() { "$1" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; }
python_can_make_venvs() { "$1" -c 'import ensurepip, venv' 2>/dev/null; }

find_python() {
    local candidate
    for candidate in python3 python3.13 python3.12 python3.11; do
        if command -v "$candidate" >/dev/null && python_is_recent "$candidate"; then
            command -v "$candidate"
            return 0
        fi
    done
    return 1
}

missing_system_packages() {
    local python
    if ! compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then echo postgresql; fi
    if ! command -v qbittorrent-nox >/dev/null; then echo qbittorrent-nox; fi
    # Workers whose clocks are shifted against the PostgreSQL server's (tests/engine/
    # test_skewed_clocks.py) run under libfaketime.
    if ! compgen -G '/usr/lib/*/faketime/libfaketimeMT.so.1' >/dev/null; then echo faketime; fi
    # The importer's tests mount a tmpfs (full disk, read-only library) and loop-mount a btrfs
    # image (reflinks): a full run must not skip them for want of these tools.
    if ! command -v mkfs.btrfs >/dev/null; then echo btrfs-progs; fi
    if ! command -v mount >/dev/null || ! command -v losetup >/dev/null; then echo mount; fi
    if ! command -v runuser >/dev/null; then echo util-linux; fi
    # The browser tests of `umt web` drive Debian's chromium (Playwright's download is not used).
    # Without root they are skipped instead (see tests/web/browser).
    if [[ ! -x /usr/bin/chromium && $(id -u) -eq 0 ]]; then echo chromium; fi
    # Debian's python3 cannot create virtualenvs without python3-venv (ensurepip).
    if [[ ! -x $VENV/bin/python ]]; then
        if ! python=$(find_python); then
            echo python3 python3-venv
        elif ! python_can_make_venvs "$python"; then
            echo python3-venv
        fi
    fi
}

apt_lists_present() { compgen -G '/var/lib/apt/lists/*_Packages*' >/dev/null; }

apt_install() {
    export DEBIAN_FRONTEND=noninteractive
    if ! apt_lists_present; then apt-get update; fi
    if ! apt-get install -y --no-install-recommends "$@"; then
        # Stale package lists point at files the mirror no longer has.
        apt-get update
        apt-get install -y --no-install-recommends "$@"
    fi
}

ensure_system_packages() {
    local missing
    missing=$(missing_system_packages)
    missing=${missing//$'\n'/ }
    if [[ -z $missing ]]; then return 0; fi
    if [[ $(id -u) -ne 0 ]]; then
        fail "missing system packages: $missing
  install them first, e.g.: sudo apt-get install -y --no-install-recommends $missing" 2
    fi
    section "installing system packages: $missing"
    # shellcheck disable=SC2086  # one word per package
    apt_install $missing
}

ensure_venv() {
    local python
    if [[ -x $VENV/bin/python ]] && "$VENV/bin/python" -c '' 2>/dev/null; then return 0; fi
    python=$(find_python) || fail "no Python 3.11 or newer found (tried python3, python3.1[1-3])"
    section "creating $VENV with $python"
    "$python" -m venv --clear "$VENV"
}

ensure_project_installed() {
    local wanted
    wanted=$(sha256sum pyproject.toml | cut -d' ' -f1)
    if [[ -f $INSTALL_STAMP && $(<"$INSTALL_STAMP") == "$wanted" ]]; then return 0; fi
    section "installing umt and its test dependencies into $VENV"
    "$VENV/bin/pip" install -q -e '.[test]'
    printf '%s\n' "$wanted" >"$INSTALL_STAMP"
}

bootstrap() {
    section "system packages"
    ensure_system_packages
    section "python environment"
    ensure_venv
    ensure_project_installed
}
