#!/bin/sh
# The image's entrypoint, with the conventions of the official redis image:
#
#   docker run rill --requirepass secret          options after the image name are
#   docker run rill /etc/rill/rill.conf            rill-server's (so is a *.conf file)
#   docker run rill rill-server --port 7000        rill-server named explicitly
#   docker run rill sh -c '...'                    anything else runs as given
#
# Started as root (the default), rill-server first gets the data directory (the working
# directory, /data) handed to the image's user, then runs as that user, so a volume or a
# bind mount that belongs to root does not make every save fail. Started with --user, it
# runs as that user and the directory must already be writable by it.
set -e

# The image's user and group `rill`, by number: the numbers work even where the name
# does not resolve (and they are what a bind-mounted directory's owner must match).
rill_uid=999
rill_gid=999

case "$1" in
    -*|*.conf) set -- rill-server "$@" ;;
esac

if [ "$1" = rill-server ] && [ "$(id -u)" = 0 ]; then
    # Only what is not rill's already: a large volume is not walked twice on every start.
    if ! find . ! -user "$rill_uid" -exec chown "$rill_uid:$rill_gid" '{}' +; then
        echo "docker-entrypoint: could not give $(pwd) to uid $rill_uid; saving there may fail" >&2
    fi
    # Again, as rill: the rest of this script runs unprivileged.
    exec setpriv --reuid="$rill_uid" --regid="$rill_gid" --clear-groups "$0" "$@"
fi

if [ "$1" = rill-server ]; then
    # Snapshots and the AOF readable by the server's user only, unless a umask was chosen.
    if [ "$(umask)" = 0022 ]; then
        umask 0077
    fi
    # Clients reach a container from other addresses than loopback (other containers, a
    # published port), which protected mode refuses while no password is set. Without a
    # config file (which then decides), protected mode is off, as in the official redis
    # image; it goes first, so an explicit --protected-mode yes later still wins.
    if [ $# -eq 1 ]; then
        set -- rill-server --protected-mode no
    else
        case "$2" in
            --version|--help) ;;
            --*)
                shift
                set -- rill-server --protected-mode no "$@"
                ;;
        esac
    fi
fi

exec "$@"
