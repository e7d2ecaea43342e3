#!/usr/bin/env bash
# Back up, or restore, what a term of the class hub produces: the course copy's grading/ (the
# gradebook, submissions, feedback, reports), the course's folders in the exchange, and the home
# folders of every account in the two class groups.
#
#   hub/backup.sh backup  [FILE]   default FILE: $HUB_PREFIX/backups/hub-<date>.tar.gz (mode 600)
#   hub/backup.sh restore FILE     into $HUB_PREFIX/course/grading and $HUB_EXCHANGE; the homes into
#                                  $HUB_PREFIX/restored-homes/<name>, or with HOMES=1 into each
#                                  account's home
#
# Students write into their homes and the exchange's inbound/, so a link there may point at any
# file of the machine (/etc/shadow, the first passwords): the archive holds links as links (the
# ones that point out of their folder are named), never what they point to. A restore writes only
# under the prefix and the exchange it is given, unless HOMES=1; even then it never replaces a
# file changed after the backup (hub/restore.py names each one). Owners are kept by name.
set -euo pipefail
PREFIX="${HUB_PREFIX:-/srv/attention-from-scratch}"
EXCHANGE="${HUB_EXCHANGE:-/srv/nbgrader/exchange}"
COURSE_ID="attention-from-scratch"
say() { printf '[hub/backup] %s\n' "$*"; }
members() {  # every account in the class groups, listed or as primary group
    for group in attention-students attention-instructors; do
        entry="$(getent group "$group")" || continue
        gid="$(cut -d: -f3 <<<"$entry")"
        tr , '\n' <<<"$(cut -d: -f4 <<<"$entry")"
        getent passwd | awk -F: -v g="$gid" '$4 == g {print $1}'
    done | sed '/^$/d' | sort -u
}
umask 077
links_out() {  # the links under $1 that point out of it: kept as links, and named
    local top
    top="$(readlink -m "$1")"
    find "$1" -type l -print0 2>/dev/null | while IFS= read -r -d '' link; do
        case "$(readlink -m "$link")" in "$top"/*) ;; *) say "archived as a link, not followed: $link -> $(readlink "$link")" ;; esac
    done
}
add() {  # add ARCHIVE FOLDER MEMBER NAME [TAR OPTION ...]: MEMBER of FOLDER, as NAME in the archive
    local archive="$1" folder="$2" member="$3" name="$4" status=0
    shift 4
    # no --dereference: a link is archived as the link; 1 is tar's "a file changed as we read it"
    tar -rf "$archive" -C "$folder" --transform="flags=rSh;s|^${member//./\\.}|$name|" "$@" "$member" || status=$?
    [ "$status" -le 1 ] || exit "$status"
}
case "${1:-}" in
backup)
    file="${2:-$PREFIX/backups/hub-$(date -u +%Y%m%dT%H%M%SZ).tar.gz}"
    mkdir -p "$(dirname "$file")"
    staging="$(mktemp -d)"
    trap 'rm -rf "$staging"' EXIT
    # the gradebook is read through SQLite's own backup, so a write in progress cannot tear it
    "${HUB_ENV:-$PREFIX/env}/bin/python" - "$PREFIX/course/grading/gradebook.db" "$staging/gradebook.db" <<'PY'
import sqlite3, sys
src, dest = sqlite3.connect(sys.argv[1]), sqlite3.connect(sys.argv[2])
src.backup(dest)
PY
    archive="$staging/hub.tar"
    tar -cf "$archive" -C "$staging" gradebook.db
    add "$archive" "$PREFIX/course" grading grading --exclude=grading/gradebook.db \
        --exclude='grading/gradebook.db-*' --exclude=grading/.workers
    add "$archive" "$EXCHANGE" "$COURSE_ID" exchange
    links_out "$EXCHANGE/$COURSE_ID"
    homes=0
    for user in $(members); do
        home="$(getent passwd "$user" | cut -d: -f6)"
        [ -n "$home" ] && [ -d "$home" ] && [ ! -L "$home" ] || continue
        add "$archive" "$home" . "homes/$user"
        links_out "$home"
        homes=$((homes + 1))
    done
    gzip -c "$archive" > "$file.part"
    chmod 600 "$file.part"
    mv "$file.part" "$file"
    say "backed up the gradebook, grading/, the exchange and $homes home folders: $file"
    ;;
restore)
    file="${2:?usage: hub/backup.sh restore FILE}"
    [ -r "$file" ] || { say "no backup at $file"; exit 2; }
    getent group attention-instructors >/dev/null || groupadd --system attention-instructors
    staging="$(mktemp -d)"
    trap 'rm -rf "$staging"' EXIT
    tar -C "$staging" --same-owner -xzf "$file"
    here="$(dirname "$0")"
    put() { python3 "$here/restore.py" "$@"; }
    mv "$staging/gradebook.db" "$staging/grading/gradebook.db"
    # a fresh prefix and exchange get install.sh's modes: every account passes through both
    [ -d "$PREFIX" ] || install -d -m 755 "$PREFIX"
    [ -d "$EXCHANGE" ] || install -d -m 1777 "$EXCHANGE"
    mkdir -p "$PREFIX/course"
    put "$staging/grading" "$PREFIX/course/grading" --what "grading/"
    # the course copy is the instructors' alone: the gradebook never readable by a student
    chgrp -R attention-instructors "$PREFIX/course"
    chmod -R u+rwX,g+rwX,o-rwx "$PREFIX/course"
    put "$staging/exchange" "$EXCHANGE/$COURSE_ID" --what "the exchange"
    for saved in "$staging"/homes/*; do
        [ -d "$saved" ] || continue
        user="$(basename "$saved")"
        if [ -n "${HOMES:-}" ] && home="$(getent passwd "$user" | cut -d: -f6)" && [ -n "$home" ]; then
            put "$saved" "$home" --what "$user's home"
            say "restored $user's home into $home (files changed since the backup kept, as listed)"
        else
            mkdir -p -m 700 "$PREFIX/restored-homes"
            chmod 700 "$PREFIX/restored-homes"
            put "$saved" "$PREFIX/restored-homes/$user" --what "$user's home"
            say "$user's home is in $PREFIX/restored-homes/$user${HOMES:+ (no account $user here)}"
        fi
    done
    [ -n "${HOMES:-}" ] || say "the live home folders were not touched (HOMES=1 restores into them)"
    say "restored $file into $PREFIX/course/grading and $EXCHANGE/$COURSE_ID"
    ;;
*)
    echo "usage: hub/backup.sh backup [FILE] | restore FILE (HOMES=1: into the accounts' homes)" >&2
    exit 2
    ;;
esac
