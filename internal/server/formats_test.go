package server

// The tests open datasets by FORMAT:PATH (Config.Datasets) as the daemon
// does, so they need the formats loaderd ships registered, as
// cmd/loaderd/formats.go registers them for the daemon.
import _ "github.com/loaderd/loaderd/loader/format/all"
