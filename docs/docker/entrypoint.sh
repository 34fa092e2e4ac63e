#!/bin/sh
# The image's entry point: make sure the data folder is the app's, then run the command as the app's user.
#
# Started as root (the image's default), it gives the data folder (a bind-mounted host folder arrives
# with the host's owner, or root's when Docker made it) to the inspector user, then drops root for
# good. Started as another user (--user), it can give nothing away. Either way, a folder the app
# cannot write stops the start with a message that says what to do, not with the app's traceback.
set -eu

app_user=inspector
app_uid="$(id -u "$app_user")"
data="${INSPECTOR_DATA_DIR:-/data}"

as_app() {
    setpriv --reuid="$app_user" --regid="$app_user" --init-groups -- "$@"
}

# Say why the data folder cannot be used by uid $1 and what to do, then stop.
cannot_write() {
    mount_options="$(awk -v dir="$data" '$5 == dir { options = $6 } END { print options }' /proc/self/mountinfo)"
    case ",$mount_options," in
    *,ro,*)
        echo "mcp-inspector: the data folder $data is mounted read-only; the app keeps its database" \
            "and keys there: mount it read-write (no :ro)." >&2
        exit 1 ;;
    esac
    owner="$(stat -c %u "$data" 2>/dev/null || echo none)"
    echo "mcp-inspector: the data folder $data (owner: uid $owner) is not writable by uid $1. Either:" >&2
    if [ "$(id -u)" != 0 ]; then
        echo "  - start the container as root, the image's default (no --user): it gives the folder" \
            "to the $app_user user (uid $app_uid), then runs as that user;" >&2
    fi
    cat >&2 <<MESSAGE
  - or run the container as the folder's owner: --user $owner (docker run), user: "$owner" (Compose);
  - or give the folder to uid $1 on the host: chown -R $1 /the/host/folder
MESSAGE
    exit 1
}

if [ "$(id -u)" = 0 ]; then
    mkdir -p "$data" "$HOME" 2>/dev/null || true
    for dir in "$data" "$HOME"; do
        [ -d "$dir" ] || continue
        if [ -n "$(find "$dir" -xdev ! -user "$app_user" -print -quit)" ]; then
            echo "mcp-inspector: giving $dir to the $app_user user (uid $app_uid)" >&2
            # -h: a symbolic link in the folder is given away itself, never what it points to.
            find "$dir" -xdev ! -user "$app_user" -exec chown -h "$app_user:$app_user" {} + || true
        fi
    done
    # Checked as the app's user: root may write where the app cannot (a root-squashed NFS share, say).
    as_app sh -c '[ -d "$1" ] && [ -w "$1" ] && [ -x "$1" ]' check "$data" || cannot_write "$app_uid"
    exec setpriv --reuid="$app_user" --regid="$app_user" --init-groups -- "$@"
fi

mkdir -p "$data" 2>/dev/null || true
{ [ -d "$data" ] && [ -w "$data" ] && [ -x "$data" ]; } || cannot_write "$(id -u)"
# A user other than the image's has no home of its own: npm's and uv's caches go to a fresh one.
if [ ! -w "${HOME:-/nonexistent}" ]; then
    HOME="$(mktemp -d)"
    export HOME
fi
exec "$@"
