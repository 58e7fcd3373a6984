# Sourced by the scripts: loaderd's Go modules and how to build its two
# commands. The daemon is the top module; the client, the wire protocol,
# the sampler, the pinned pool, the trainer and the trainer's command are
# modules of their own, tied by replace directives (no go.work: each
# module builds, vets and tests as it is, as CI checks it).

# Every module's directory, the daemon's first.
MODULES=(. proto sampler pinned client trainer cmd/trainer)

# The scripts build each module as it stands, whatever go.work a
# developer keeps for an editor.
export GOWORK=off

# build_commands DIR [go build flags...]: DIR/loaderd and DIR/trainer.
build_commands() {
	local dir
	dir=$(cd "$1" && pwd)
	shift
	go build "$@" -o "$dir/loaderd" ./cmd/loaderd
	(cd cmd/trainer && go build "$@" -o "$dir/trainer" .)
}
