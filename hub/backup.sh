#!/usr/bin/env bash
# Back up, or restore, what a term of the class hub produces: the course copy's grading/ (the
# gradebook, submissions, feedback, reports), the course's folders in the exchange, and the home
# folders of every account in the two class groups.
#
#   hub/backup.sh backup  [FILE]   default FILE: $HUB_PREFIX/backups/hub-<date>.tar.gz (mode 600)
#   hub/backup.sh restore FILE     into $HUB_PREFIX/course/grading, $HUB_EXCHANGE and the homes
#
# A home folder is restored into its account's home where the account exists, else into
# $HUB_PREFIX/restored-homes/<name> (the command says which). Owners are kept by name.
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
case "${1:-}" in
backup)
    file="${2:-$PREFIX/backups/hub-$(date -u +%Y%m%dT%H%M%SZ).tar.gz}"
    mkdir -p "$(dirname "$file")"
    staging="$(mktemp -d)"
    trap 'rm -rf "$staging"' EXIT
    mkdir -p "$staging/homes"
    ln -s "$PREFIX/course/grading" "$staging/grading"
    ln -s "$EXCHANGE/$COURSE_ID" "$staging/exchange"
    homes=0
    for user in $(members); do
        home="$(getent passwd "$user" | cut -d: -f6)"
        [ -d "$home" ] && ln -s "$home" "$staging/homes/$user" && homes=$((homes + 1))
    done
    # the gradebook is read through SQLite's own backup, so a write in progress cannot tear it
    "${HUB_ENV:-$PREFIX/env}/bin/python" - "$PREFIX/course/grading/gradebook.db" "$staging/gradebook.db" <<'PY'
import sqlite3, sys
src, dest = sqlite3.connect(sys.argv[1]), sqlite3.connect(sys.argv[2])
src.backup(dest)
PY
    tar -C "$staging" --dereference --exclude=grading/gradebook.db --exclude='grading/gradebook.db-*' --exclude=grading/.workers \
        -czf "$file" gradebook.db grading exchange homes
    chmod 600 "$file"
    say "backed up the gradebook, grading/, the exchange and $homes home folders: $file"
    ;;
restore)
    file="${2:?usage: hub/backup.sh restore FILE}"
    [ -r "$file" ] || { say "no backup at $file"; exit 2; }
    getent group attention-instructors >/dev/null || groupadd --system attention-instructors
    staging="$(mktemp -d)"
    trap 'rm -rf "$staging"' EXIT
    tar -C "$staging" --same-owner -xzf "$file"
    mkdir -p "$PREFIX/course/grading" "$EXCHANGE/$COURSE_ID"
    cp -a "$staging/grading/." "$PREFIX/course/grading/"
    cp -a "$staging/gradebook.db" "$PREFIX/course/grading/gradebook.db"
    chgrp -R attention-instructors "$PREFIX/course"
    chmod -R u+rwX,g+rwX,o-rwx "$PREFIX/course"
    cp -a "$staging/exchange/." "$EXCHANGE/$COURSE_ID/"
    for saved in "$staging"/homes/*; do
        [ -d "$saved" ] || continue
        user="$(basename "$saved")"
        if home="$(getent passwd "$user" | cut -d: -f6)" && [ -n "$home" ]; then
            mkdir -p "$home"
            cp -a "$saved/." "$home/"
            say "restored $user's home into $home"
        else
            mkdir -p "$PREFIX/restored-homes"
            cp -a "$saved" "$PREFIX/restored-homes/$user"
            say "no account $user here: their home is in $PREFIX/restored-homes/$user"
        fi
    done
    say "restored $file into $PREFIX/course/grading and $EXCHANGE/$COURSE_ID"
    ;;
*)
    echo "usage: hub/backup.sh backup [FILE] | restore FILE" >&2
    exit 2
    ;;
esac
